"""The durable journal's tables as the shared SQL sees them: one home for its column lists
and the statements several parts of the journal use.

The run columns come from :class:`~surefoot.storage.runs.RunRow` itself (its fields, in
order), so a run is read with ``RunRow(*row)`` and written with :func:`run_params`, and a
column added to the record is added to every statement here. The step statements that a
backend lays out its own way (SQLite keeps a run's steps in one range of one b-tree) are a
:class:`StepSQL`, which the backend gives the journal and the parts that touch steps.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Iterable
from typing import Any

from ..runs import TERMINAL, UNFINISHED, RunRow, StepWrite, sql_list

__all__ = [
    "AUDIT_SQL",
    "CHANNEL",
    "CHILD_STEP_SQL",
    "DONE_SQL",
    "EPOCH",
    "F8",
    "FINISH_SQL",
    "INSERT_RUN",
    "MAX_ORDER",
    "OPEN",
    "RUN_COLS",
    "RUN_MARKS",
    "SEL",
    "STEP_COLS",
    "STEP_SQL",
    "STEP_TYPES",
    "TEXT",
    "TYPED_RUN_MARKS",
    "StepSQL",
    "created_detail",
    "run_params",
    "step_params",
    "workflow_pairs",
    "workflows_text",
]

#: The NOTIFY channel of new work (PostgreSQL; SQLite's dialect ignores notifications).
CHANNEL = "durable_work"

TEXT = "CAST(? AS TEXT)"  # PostgreSQL cannot infer a NULL's type in a SELECT list
F8 = "CAST(? AS DOUBLE PRECISION)"

_FIELDS = dataclasses.fields(RunRow)
#: Every run column, in :class:`RunRow`'s order: ``RunRow(*row)`` reads a selected row.
SEL = ", ".join(f.name for f in _FIELDS)
EPOCH = [f.name for f in _FIELDS].index("epoch")
_BY_JOURNAL = ("claims", "started_at")  # counted by claims, set when a queue starts the run
_WRITTEN = [f for f in _FIELDS if f.name not in _BY_JOURNAL]
#: The run columns a new run is inserted with, and their placeholders.
RUN_COLS = ", ".join(f.name for f in _WRITTEN)
RUN_MARKS = ", ".join("?" for _ in _WRITTEN)
#: The same placeholders typed for a ``SELECT`` list (PostgreSQL cannot infer a NULL's type).
TYPED_RUN_MARKS = ", ".join(
    F8 if "float" in str(f.type) else "?" if "int" in str(f.type) else TEXT for f in _WRITTEN
)
run_params = operator.attrgetter(*(f.name for f in _WRITTEN))
"""The parameters of an insert of a :class:`RunRow` into :data:`RUN_COLS`."""

#: A new run, unless its id (or, in its queue, an unfinished run's dedup id) is taken.
INSERT_RUN = f"INSERT INTO durable_runs ({RUN_COLS}) VALUES ({RUN_MARKS}) ON CONFLICT DO NOTHING"

#: ``('succeeded', 'failed', 'cancelled')`` and the statuses a run may still move from.
DONE_SQL = sql_list(TERMINAL)
OPEN = tuple(sorted(UNFINISHED))

AUDIT_SQL = "INSERT INTO durable_audit (run_id, at, actor, action, detail) VALUES (?, ?, ?, ?, ?)"

#: A run's end (not a sleep): ``status, result, error, updated_at, run_id, epoch``.
FINISH_SQL = (
    f"UPDATE durable_runs SET status = ?, result = {TEXT}, error = {TEXT}, owner = NULL, "
    "lease_until = NULL, wake_at = NULL, waiting_for = NULL, updated_at = ? "
    "WHERE run_id = ? AND epoch = ?"
)

STEP_COLS = (
    "run_id, pos, name, kind, status, result, error, attempts, epoch, started_at, finished_at"
)
STEP_SQL = (
    f"INSERT INTO durable_steps ({STEP_COLS}) SELECT ?, ?, ?, ?, ?, {TEXT}, {TEXT}, ?, ?, "
    f"?, {F8} FROM durable_runs WHERE run_id = ? AND epoch = ?{{share_lock}} "
    "ON CONFLICT (run_id, pos) DO UPDATE SET status = excluded.status, "
    "result = excluded.result, error = excluded.error, attempts = excluded.attempts, "
    "epoch = excluded.epoch, finished_at = excluded.finished_at"
)
#: The SQL types of :data:`STEP_SQL`'s parameters (see ``Dialect.prepare``).
STEP_TYPES = ("text",) * 7 + ("int4", "int8", "float8", "float8", "text", "int8")

#: The parent's step of a new child, journalled only if the child is the parent's (see
#: :class:`~surefoot.storage.runs.ChildWrite`).
CHILD_STEP_SQL = (
    f"INSERT INTO durable_steps ({STEP_COLS}) SELECT {TEXT}, {TEXT}, {TEXT}, "
    f"{TEXT}, {TEXT}, {TEXT}, {TEXT}, ?, ?, {F8}, {F8} FROM durable_runs "
    "WHERE run_id = ? AND epoch = ? AND EXISTS (SELECT 1 FROM durable_runs c WHERE "
    "c.run_id = ? AND c.parent_id = ? AND c.workflow = ? AND c.args = ?){share_lock} "
    "ON CONFLICT (run_id, pos) DO UPDATE SET status = excluded.status, "
    "result = excluded.result, error = excluded.error, attempts = excluded.attempts, "
    "epoch = excluded.epoch, finished_at = excluded.finished_at"
)

MAX_ORDER = 16_777_215  # 2**24 - 1: the most steps one run journals where orders are kept


@dataclasses.dataclass(frozen=True, slots=True)
class StepSQL:
    """The statements on ``durable_steps`` that a backend may lay out its own way.

    ``{seq}`` is the dialect's ``step_seq``, ``{share_lock}`` its ``share_lock``. The
    defaults key a step by ``(run_id, pos)`` (PostgreSQL). With ``ordered``, every step
    statement also takes the record's journal ``order`` as its last parameter (SQLite:
    a run's steps are one range of one b-tree, see its journal).

    Attributes:
        write: one step, the writer's epoch checked (the hot path).
        found: ``ordered`` only: one step whose record has no order (found by position).
        child: the parent's step of a new child (see :data:`CHILD_STEP_SQL`).
        of_run / at / delete / delete_all: a run's steps in order; one step's ``{seq}``;
            delete one step; delete a run's steps. Parameters: ``(run_id[, pos])``.
        copy: ``(new run id, run id, a step's seq)``: the done steps before it, copied.
        summed: ``ordered`` only: every step row carries its checksum
            (:func:`~surefoot.storage.rowsum.step_sum`), the last parameter of ``write``,
            ``found`` and ``child`` and the last column of ``of_run``; a row read back that
            fails it is refused (SQLite: its pages carry no checksum of their own).
    """

    write: str = STEP_SQL
    found: str = ""
    child: str = CHILD_STEP_SQL
    of_run: str = (
        f"SELECT {STEP_COLS}, {{seq}} FROM durable_steps WHERE run_id = ? ORDER BY {{seq}}"
    )
    at: str = "SELECT {seq} FROM durable_steps WHERE run_id = ? AND pos = ?"
    delete: str = "DELETE FROM durable_steps WHERE run_id = ? AND pos = ?"
    delete_all: str = "DELETE FROM durable_steps WHERE run_id = ?"
    copy: str = (
        f"INSERT INTO durable_steps ({STEP_COLS}) SELECT ?, pos, name, kind, status, "
        "result, error, attempts, 0, started_at, finished_at FROM durable_steps "
        "WHERE run_id = ? AND {seq} < ? AND status IN ('done', 'error') ORDER BY {seq}"
    )
    ordered: bool = False
    summed: bool = False


def step_params(r: StepWrite) -> tuple[Any, ...]:
    """The parameters of :data:`STEP_SQL` for ``r``."""
    return (
        r.run_id, r.pos, r.name, r.kind, r.status, r.result, r.error, r.attempts, r.epoch,
        r.started_at, r.finished_at, r.run_id, r.epoch,
    )  # fmt: skip


def workflows_text(workflows: Iterable[tuple[str, str]]) -> str:
    """A worker's (workflow, version) pairs as ``durable_workers.workflows`` holds them:
    ``name@version`` items joined by ``;``, sorted."""
    return ";".join(f"{n}@{v}" for n, v in sorted(workflows))


def workflow_pairs(text: str) -> list[tuple[str, str]]:
    """The (workflow, version) pairs of a ``durable_workers.workflows`` text, in order (a
    name may contain ``@``; the version is after the last one)."""
    out = []
    for item in str(text).split(";"):
        if "@" in item:
            n, _, v = item.rpartition("@")
            out.append((n, v))
    return out


def created_detail(row: RunRow) -> str:
    """The detail of a new run's ``created`` audit entry: its queue and parent, if any."""
    return json.dumps({k: v for k, v in (("queue", row.queue), ("parent", row.parent_id)) if v})
