"""Storage's shape: factories hand out the protocols, backend modules are private, and no
module above storage/ imports a database driver."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import surefoot
from surefoot import storage
from surefoot.errors import ConfigError
from surefoot.storage.journal import Journal
from surefoot.storage.keys import KeyStore
from surefoot.storage.state import StateStore
from surefoot.storage.streams import StreamLog

SRC = Path(surefoot.__file__).parent
DRIVERS = {"sqlite3", "psycopg", "psycopg_pool", "redis"}


def test_sqlite_factories_hand_out_the_protocols(tmp_path: Path) -> None:
    """SQLiteStorage's keystore, statestore, stream and journal implement their protocols."""
    st = storage.open(f"sqlite:///{tmp_path / 'f.db'}")
    try:
        assert isinstance(st.keystore(), KeyStore)
        assert isinstance(st.statestore("ns"), StateStore)
        assert isinstance(st.stream("s"), StreamLog)
        assert isinstance(st.journal(), Journal)
    finally:
        st.close()


def test_memory_factories_hand_out_the_protocols_and_refuse_a_journal() -> None:
    """MemoryStorage offers KeyStore, StateStore and StreamLog, and refuses a Journal."""
    st = storage.open("memory://")
    assert isinstance(st.keystore(), KeyStore)
    assert isinstance(st.statestore("ns"), StateStore)
    assert isinstance(st.stream("s"), StreamLog)
    with pytest.raises(ConfigError, match="memory:// cannot hold a durable journal"):
        st.journal()


def test_backend_modules_are_private() -> None:
    """Every module inside a backend package is _private; the package re-exports its names."""
    for backend in ("memory", "sqlite", "postgres", "redis"):
        mods = sorted(p.name for p in (SRC / "storage" / backend).glob("*.py"))
        assert [m for m in mods if m != "__init__.py" and not m.startswith("_")] == [], backend


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_module_above_storage_imports_a_database_driver() -> None:
    """Only modules under storage/ import sqlite3, psycopg or redis."""
    offenders = {
        str(p.relative_to(SRC)): sorted(_imports(p) & DRIVERS)
        for p in SRC.rglob("*.py")
        if "storage" not in p.relative_to(SRC).parts and _imports(p) & DRIVERS
    }
    assert offenders == {}


def test_base_re_exports_the_protocol_modules_names() -> None:
    """storage.base (a compatibility shim) offers the names it always did, each the very
    object of the protocol module that holds it now."""
    from surefoot.storage import backend, base, checks, journal, keys, runs, state, streams

    modules = (backend, checks, journal, keys, runs, state, streams)
    homes = {n: m for m in modules for n in m.__all__}
    assert len(base.__all__) == 39  # as many as base.py held before the split
    for name in base.__all__:
        assert getattr(base, name) is getattr(homes[name], name), name


def test_nothing_in_the_package_imports_the_shim() -> None:
    """Modules of surefoot import from the protocol modules, not from storage.base."""
    users = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.name != "base.py" and any(m.endswith("base") for m in _modules_named(p))
    ]
    assert users == []


def _modules_named(path: Path) -> list[str]:
    return [
        node.module or ""
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
    ]
