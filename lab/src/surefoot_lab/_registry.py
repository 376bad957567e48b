"""The lab's registry: experiments by id, and the result shape they return.

An experiment is a function taking a :class:`LabContext` and returning a :class:`LabResult`
made of tables (for people) and facts (for tests). Experiments import only surefoot's public
API, take their seeds from the context, and record what they ran with.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surefoot.errors import ConfigError
from surefoot.storage import redact

from .local_model import LabModel

__all__ = [
    "FAKE_MODEL",
    "NO_MODEL",
    "Experiment",
    "LabContext",
    "LabResult",
    "Table",
    "experiment",
    "experiments",
    "get",
    "select",
]

FAKE_MODEL = "FakeLLM (seeded fake model, not a real LLM)"
NO_MODEL = "none (this experiment makes no model call)"


@dataclass(slots=True)
class Table:
    """A titled table: column names and rows of plain values."""

    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    note: str = ""

    def add(self, *row: Any) -> None:
        if len(row) != len(self.columns):
            raise ConfigError(
                f"table {self.title!r} has {len(self.columns)} columns, row has {len(row)}"
            )
        self.rows.append(list(row))

    def as_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


@dataclass(slots=True)
class LabResult:
    """What an experiment returns.

    Attributes:
        tables: what people read.
        facts: named measured values that tests assert (``{"double_charges_keyed": 0}``).
        answer: the one-paragraph answer to the exercise's "Done when".
        params: the parameters and seeds it ran with.
        model: the model used (the FakeLLM unless a real one was configured).
    """

    tables: list[Table] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    answer: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    model: str = FAKE_MODEL


@dataclass(slots=True)
class LabContext:
    """What an experiment runs with.

    Attributes:
        seeds: how many seeds to average over (experiments pick a default when None).
        seed: the first seed; seeds used are ``seed, seed+1, …``.
        workdir: a folder for databases and files, removed afterwards.
        db: a storage URL to run on instead of a file in ``workdir`` (when the experiment
            supports it).
        quick: smaller sizes, for tests.
        full: the full sweep where an experiment runs a stated subset by default (``--full``).
        progress: called with (done, total) on long runs.
        llm: the real model to run on (``--llm local`` or a URL); None: the FakeLLM.
        llm_absent: why the real model asked for could not be used (``--llm local``
            without ``make local-llm``); the experiments then run on their own model and
            say so. None: no real model was asked for, or it is there.
    """

    workdir: Path
    seeds: int | None = None
    seed: int = 0
    db: str | None = None
    quick: bool = False
    full: bool = False
    progress: Callable[[int, int], None] = lambda done, total: None
    llm: LabModel | None = None
    llm_absent: str | None = None

    def seed_list(self, default: int) -> list[int]:
        n = self.seeds if self.seeds is not None else default
        if n < 1:
            raise ConfigError(f"--seeds must be >= 1, got {n}")
        return list(range(self.seed, self.seed + n))

    def sqlite_url(self, name: str) -> str:
        return f"sqlite:///{self.workdir / name}"


@dataclass(frozen=True, slots=True)
class Experiment:
    """A registered experiment: id, which seed exercise it answers, and its function.

    ``real_llm``: the experiment runs its model calls on ``ctx.llm`` when one is given;
    the others keep the FakeLLM (their model is part of a simulation) and say so.
    """

    id: str
    seed_file: str
    exercise: str
    title: str
    fn: Callable[[LabContext], LabResult]
    real_llm: bool = False

    def run(self, ctx: LabContext) -> LabResult:
        started = dt.datetime.now(dt.UTC)
        result = self.fn(ctx)
        result.params.setdefault("seed", ctx.seed)
        if ctx.seeds is not None:
            result.params.setdefault("seeds", ctx.seeds)
        result.params.setdefault("date", started.isoformat(timespec="seconds"))
        if ctx.llm is None and ctx.llm_absent:
            result.params.setdefault("llm_absent", ctx.llm_absent)
            if self.real_llm and ctx.llm_absent not in result.answer:
                result.answer = (
                    f"{result.answer} --llm local was asked for, but {ctx.llm_absent}: these "
                    f"are the figures of {result.model}."
                ).strip()
        if ctx.llm is not None:
            if self.real_llm:
                result.params.setdefault("llm", {"model": ctx.llm.model, "url": ctx.llm.base_url})
                if ctx.llm.sentence() not in result.answer:
                    result.answer = f"{result.answer} {ctx.llm.sentence()}".strip()
            elif result.model == FAKE_MODEL:
                result.model = (
                    f"{FAKE_MODEL}; --llm does not apply: its model calls are part of a "
                    "simulation (injected faults, ticks or an assumed accuracy)"
                )
        result.params = _redacted(result.params)
        return result


def _redacted(value: Any) -> Any:
    """``value`` with every URL's password and secret query values masked (reports are shared)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redacted(v) for v in value)
    return value


_EXPERIMENTS: dict[str, Experiment] = {}


def experiment(
    id: str, *, seed_file: str, exercise: str, title: str, real_llm: bool = False
) -> Callable[[Callable[[LabContext], LabResult]], Callable[[LabContext], LabResult]]:
    """Register an experiment function under ``id`` (``subsystem.name``); ``real_llm``:
    it runs on ``ctx.llm`` when ``--llm`` names a real model."""

    def deco(fn: Callable[[LabContext], LabResult]) -> Callable[[LabContext], LabResult]:
        if id in _EXPERIMENTS:
            raise ConfigError(f"experiment id {id!r} registered twice")
        _EXPERIMENTS[id] = Experiment(id, seed_file, exercise, title, fn, real_llm)
        return fn

    return deco


def _load() -> None:
    from . import durable, resilience, statebus  # noqa: F401 - registers experiments


_GROUPS = ("resilience", "durable", "statebus")


def _ordered() -> list[Experiment]:
    """By subsystem in the course's order, then in registration order within each."""
    exps = list(_EXPERIMENTS.values())
    rank = {g: i for i, g in enumerate(_GROUPS)}
    return sorted(exps, key=lambda e: rank.get(e.id.split(".", 1)[0], len(rank)))


def experiments() -> list[Experiment]:
    """Every registered experiment: resilience, durable, statebus; each in registration order."""
    _load()
    return _ordered()


def get(id: str) -> Experiment:
    """The experiment with this id.

    Raises:
        ConfigError: no such id; the message lists the known ones.
    """
    _load()
    try:
        return _EXPERIMENTS[id]
    except KeyError:
        raise ConfigError(
            f"no lab experiment {id!r}; `surefoot lab list` shows them: "
            + ", ".join(e.id for e in _ordered())
        ) from None


def select(names: list[str]) -> list[Experiment]:
    """Resolve ids, subsystem prefixes (``statebus``) and ``all`` to experiments, in order."""
    _load()
    chosen: list[Experiment] = []
    for name in names:
        if name == "all":
            matches = _ordered()
        elif name in _EXPERIMENTS:
            matches = [_EXPERIMENTS[name]]
        else:
            matches = [e for e in _ordered() if e.id.startswith(name + ".")]
            if not matches:
                get(name)  # raises with the list of ids
        for e in matches:
            if e not in chosen:
                chosen.append(e)
    return chosen


@contextmanager
def context(**kwargs: Any) -> Iterator[LabContext]:
    """A ``LabContext`` with a temporary workdir that is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="surefoot-lab-") as tmp:
        yield LabContext(workdir=Path(tmp), **kwargs)
