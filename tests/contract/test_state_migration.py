"""Existing key/value stores migrate in place to the change log (issue 14): their keys read as
before, their earlier revisions read as compacted (they were never logged), and everything
written afterwards is logged and watchable."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import backend_url

from surefoot import storage
from surefoot.errors import CompactedError
from surefoot.statebus import Store
from surefoot.storage.postgres import _state as pg_state
from surefoot.storage.sqlite import _state as sqlite_state


def _old_sqlite(url: str) -> None:
    st: Any = storage.open(url)
    st.db.migrate("statestore", sqlite_state.MIGRATIONS[:3])
    with st.db.write() as c:
        for rev, (key, version) in enumerate([("a", 1), ("b", 2)], start=1):
            c.execute(
                "INSERT INTO sf_state (ns, key, value, version, revision, author, trust, "
                "written_at, lineage) VALUES ('ns', ?, ?, ?, ?, 'system', 'system', 0, ?)",
                (key, json.dumps(f"{key}{version}"), version, rev + 1, version),
            )
    st.close()


def _old_postgres(url: str) -> None:
    st: Any = storage.open(url)
    st.db.migrate("statestore", pg_state.MIGRATIONS[:3])
    st.db.execute(
        "SELECT * FROM sf_state_write('ns', 'a', '\"a1\"', 'system', 'system', NULL, "
        "0, NULL, NULL, NULL, NULL)"
    )
    for v in ("b1", "b2"):
        st.db.execute(
            "SELECT * FROM sf_state_write('ns', 'b', %s, 'system', 'system', NULL, 0, NULL, "
            "NULL, NULL, NULL)",
            (json.dumps(v),),
        )
    st.close()


def _old_redis(url: str) -> None:
    st: Any = storage.open(url)
    h = st.db.key("state", "{ns}")
    st.db.client.hset(h, "a", json.dumps(['"a1"', 1, 1, "system", "system", 0.0, 1]))
    st.db.client.hset(h, "b", json.dumps(['"b2"', 2, 3, "system", "system", 0.0, 2]))
    st.db.client.set(h + ":rev", 3)
    st.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "redis"])
def test_an_existing_store_migrates_in_place(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Keys written before the log existed: read as before; their older revisions and a
    watch from before the upgrade raise CompactedError; new changes are logged."""
    url = backend_url(kind, tmp_path, request, "mig")
    {"sqlite": _old_sqlite, "postgresql": _old_postgres, "redis": _old_redis}[kind](url)
    st = Store(url, "ns")
    assert st.read("a").value == "a1" and st.read("b").value == "b2"  # type: ignore[union-attr]
    assert st.revision == 3
    with pytest.raises(CompactedError):
        list(st.watch(timeout=0))
    with pytest.raises(CompactedError):
        st.read_at("b", 2)
    assert st.read_at("b", 3).value == "b2" and st.read_at("a", 3).value == "a1"  # type: ignore[union-attr]
    e = st.write("b", "b3", expect=2)
    assert (e.version, e.revision) == (3, 4)
    assert [(c.key, c.value) for c in st.watch(after_revision=3, timeout=0)] == [("b", "b3")]
    assert st.history("b")[-1].value == "b3"
    st.close()
    again = Store(url, "ns")  # a second open migrates nothing again
    assert again.read("b").value == "b3" and again.revision == 4  # type: ignore[union-attr]
    again.close()


def test_a_fresh_namespace_keeps_its_whole_log(tmp_path: Path) -> None:
    """A namespace created after the upgrade is not marked compacted."""
    st = Store(f"sqlite:///{tmp_path / 'new.db'}", f"n-{uuid.uuid4().hex[:6]}")
    st.write("k", 1)
    assert [c.revision for c in st.watch(timeout=0)] == [1]
    st.close()
