"""Retention: delete finished runs by age or count (``app.prune``, ``surefoot runs prune``,
``Worker(retention=…)``).

Only runs that ended (succeeded, failed, cancelled) are deleted, with their steps,
signals, chunks (large values, see ``._chunks``: they belong to one run, so deleting the
run's rows collects them exactly, superseded ones included) and the run's token stream
(``._tokens``); a child is kept while its parent has not finished. The audit log is kept
by default, with a last entry ``pruned`` (actor ``retention``), so who did what to a run
stays answerable after its journal is gone; ``audit="drop"`` deletes it too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..clock import seconds as _secs
from ..errors import ConfigError
from ..storage.pruning import Pruning

__all__ = ["Retention", "prune_runs"]


@dataclass(frozen=True, slots=True)
class Retention:
    """What to prune: finished runs older than ``older_than`` seconds and/or beyond the
    newest ``keep``; their audit log kept (``audit="keep"``) or dropped (``"drop"``).
    ``every``: seconds between prunes when a worker applies it."""

    older_than: float | None = None
    keep: int | None = None
    audit: str = "keep"
    every: float = 60.0

    @classmethod
    def make(
        cls, older_than: float | None, keep: int | None, audit: str = "keep", every: float = 60.0
    ) -> Retention:
        """A validated policy.

        Raises:
            ConfigError: neither bound, a negative one, or ``audit`` not keep/drop.
        """
        if older_than is None and keep is None:
            raise ConfigError("prune needs older_than (seconds) or keep (a count), or both")
        age = None if older_than is None else _secs(older_than, "older_than")
        if age is not None and age < 0:
            raise ConfigError(f"older_than must be >= 0 seconds, got {older_than!r}")
        if keep is not None and (not isinstance(keep, int) or isinstance(keep, bool) or keep < 0):
            raise ConfigError(f"keep must be an int >= 0, got {keep!r}")
        if audit not in ("keep", "drop"):
            raise ConfigError(f"audit must be 'keep' or 'drop', got {audit!r}")
        return cls(age, keep, audit, _secs(every, "every"))


def prune_runs(
    journal: Pruning,
    policy: Retention,
    *,
    now: float,
    pruned: Callable[[list[str]], object] | None = None,
) -> list[str]:
    """Apply ``policy`` to ``journal`` at ``now``; return the deleted run ids.

    ``pruned`` is then given the ids (the app deletes their token streams)."""
    ids = journal.prune(
        before=None if policy.older_than is None else now - policy.older_than,
        keep=policy.keep,
        drop_audit=policy.audit == "drop",
        now=now,
    )
    if ids and pruned is not None:
        pruned(ids)
    return ids
