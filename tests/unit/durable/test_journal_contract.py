"""The journal is the contract: durable reaches a journal's abilities through the protocols
of storage/ only, and its parts take small typed hosts, not the whole app as ``Any``."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import surefoot.durable
from surefoot import storage
from surefoot.durable import App
from surefoot.storage.children import Children
from surefoot.storage.chunks import Chunks
from surefoot.storage.journal import Journal
from surefoot.storage.liveness import Liveness
from surefoot.storage.pruning import Pruning
from surefoot.storage.queues import Queues
from surefoot.storage.schedules import Schedules
from surefoot.storage.sql.journal import SQLJournal
from surefoot.storage.waking import Waking

DURABLE = Path(surefoot.durable.__file__).parent


def _trees() -> list[tuple[str, ast.Module]]:
    return [(p.name, ast.parse(p.read_text())) for p in sorted(DURABLE.glob("*.py"))]


def test_no_part_takes_the_app_as_any() -> None:
    """No function of durable takes an ``app`` or ``host`` parameter annotated ``Any``."""
    bad = [
        f"{name}:{node.lineno} {node.name}({a.arg})"
        for name, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for a in node.args.args + node.args.kwonlyargs
        if a.arg in ("app", "host") and ast.unparse(a.annotation or ast.Name("Any")) == "Any"
    ]
    assert bad == []


def test_nothing_is_passed_through_by_name() -> None:
    """No class of durable forwards unknown attributes (``__getattr__``), and nothing asks a
    journal for an ability with ``getattr``."""
    bad = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                bad.append(f"{name}:{node.lineno} __getattr__")
            is_getattr = isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr"
            if is_getattr and "journal" in ast.unparse(node.args[0]):
                bad.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert bad == []


def test_the_sql_journal_is_composed_not_chained() -> None:
    """SQLJournal has no base classes (its abilities are parts), and each backend's journal
    is a SQLJournal and nothing else."""
    from surefoot.storage.postgres._journal import PostgresJournal
    from surefoot.storage.sqlite._journal import SQLiteJournal

    assert SQLJournal.__bases__ == (object,)
    assert SQLiteJournal.__bases__ == PostgresJournal.__bases__ == (SQLJournal,)


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_journal_offers_each_ability_by_its_protocol(db_url: str, wrapped: bool) -> None:
    """The backend's journal, and the journal an app uses (values passed through a codec),
    offer every ability durable uses as a part implementing its protocol."""
    st = storage.open(db_url)
    app = App(db_url)
    try:
        journal: Any = app.journal if wrapped else st.journal()
        assert isinstance(journal, Journal)
        parts = {
            "queues": Queues,
            "children": Children,
            "schedules": Schedules,
            "pruning": Pruning,
            "chunks": Chunks,
            "liveness": Liveness,
            "waking": Waking,
        }
        for attr, protocol in parts.items():
            assert isinstance(getattr(journal, attr), protocol), attr
    finally:
        app.close()
        st.close()
