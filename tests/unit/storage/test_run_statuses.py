"""Run statuses have one home (``RunStatus``): the sets, the public tuples and every status
the SQL journal spells come from it or are checked against it."""

from __future__ import annotations

import re
from pathlib import Path

import surefoot
from surefoot import durable, telemetry
from surefoot.storage.postgres._journal import MIGRATIONS as POSTGRES
from surefoot.storage.runs import ENDED, TERMINAL, UNFINISHED, RunStatus, sql_list
from surefoot.storage.sqlite._journal import MIGRATIONS as SQLITE

STORAGE = Path(surefoot.__file__).parent / "storage"
STEP_STATUSES = {"intent", "waiting", "done", "error"}  # a step row's (StepRow.status)


def test_the_public_names_are_the_enum() -> None:
    """durable.STATUSES, durable.TERMINAL and telemetry's states are RunStatus's values."""
    assert tuple(s.value for s in RunStatus) == durable.STATUSES
    assert telemetry.RUN_STATES == durable.STATUSES
    assert durable.TERMINAL == TERMINAL == {"succeeded", "failed", "cancelled"}
    assert durable.RunStatus is RunStatus
    assert TERMINAL | {"needs_attention"} == ENDED and set(RunStatus) - TERMINAL == UNFINISHED


def test_the_migrations_spell_the_same_sets() -> None:
    """The dedup index (unfinished runs) and PostgreSQL's end trigger list the enum's sets;
    a migration is history, so a new status needs a new migration, and this says so."""
    for migrations in (SQLITE, POSTGRES):
        assert f"status NOT IN {sql_list(TERMINAL)}" in migrations[3]
    assert f"NEW.status IN {sql_list(ENDED)}" in POSTGRES[7]


def test_every_status_the_sql_spells_is_a_status() -> None:
    """Every quoted status in the SQL of storage/ is a run status or a step status."""
    quoted = re.compile(r"status\s*(?:=|<>|!=|(?:NOT\s+)?IN\s*\()\s*((?:'\w+'(?:,\s*)?)+)")
    seen: set[str] = set()
    for path in sorted(STORAGE.rglob("*.py")):
        for group in quoted.findall(path.read_text()):
            seen |= set(re.findall(r"'(\w+)'", group))
    assert seen, "no status found: the pattern no longer matches the SQL"
    assert seen - {s.value for s in RunStatus} - STEP_STATUSES == set()
