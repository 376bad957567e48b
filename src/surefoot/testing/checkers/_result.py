"""What a checker found: anomalies, each with the operations involved and an explanation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..history import History, Op, Pair

__all__ = ["Anomaly", "CheckResult", "as_pairs", "ref"]


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One thing the history shows that the model forbids.

    Attributes:
        kind: the anomaly's class (``G1a``, ``G-single-realtime``, ``stale-read`` …).
        explanation: what happened, in words, naming the operations by index.
        ops: the records involved (completions where known, else invocations).
        key: the key (or stream, or run) it concerns, when there is one.
    """

    kind: str
    explanation: str
    ops: tuple[Op, ...] = ()
    key: Any = None

    def __str__(self) -> str:
        return f"{self.kind}: {self.explanation}"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A checker's verdict.

    Attributes:
        checker: which checker (``register``, ``list-append``, ``queue``, ``steps``).
        anomalies: everything found, in the order found.
        stats: counts the checker kept (operations, unknown outcomes resolved …).
    """

    checker: str
    anomalies: tuple[Anomaly, ...] = ()
    stats: Mapping[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        """True when nothing was found."""
        return not self.anomalies

    def kinds(self) -> dict[str, int]:
        """How many anomalies of each kind, by kind."""
        return dict(sorted(Counter(a.kind for a in self.anomalies).items()))

    def report(self, limit: int = 5) -> str:
        """A readable summary: the verdict, the stats, and up to ``limit`` anomalies a kind."""
        head = "valid" if self.valid else f"INVALID ({len(self.anomalies)} anomalies)"
        stats = ", ".join(f"{k}={v}" for k, v in self.stats.items())
        lines = [f"{self.checker}: {head}" + (f"; {stats}" if stats else "")]
        shown: Counter[str] = Counter()
        for a in self.anomalies:
            shown[a.kind] += 1
            if shown[a.kind] <= limit:
                lines.append(f"  {a}")
        for kind, n in self.kinds().items():
            if n > limit:
                lines.append(f"  … {n - limit} more {kind}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def as_pairs(history: History | Iterable[Op]) -> list[Pair]:
    """The history's invocation/completion pairs (``History.pairs``), from a History or ops."""
    h = history if isinstance(history, History) else History(list(history))
    return h.pairs()


def ref(p: Pair) -> Op:
    """The record that best names a pair: its completion, or its invocation."""
    return p.end if p.end is not None else p.invoke
