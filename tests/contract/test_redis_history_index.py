"""Redis keeps a per-key index of the change log (a sorted set of ``key NUL revision``),
written by the same scripts as the log: ``history`` and ``read_at`` read only the key's own
log entries, compaction keeps the index in step, and a namespace logged before the index
existed is indexed in place when opened (key layout 2, which an older surefoot refuses).

The cost is counted with ``MONITOR`` (every command the server ran for this test's prefix,
the scripts' own included), not timed."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _backends import backend_url

from surefoot import storage
from surefoot.errors import CompactedError, SchemaVersionError
from surefoot.statebus import Store
from surefoot.storage.redis import _client


@pytest.fixture
def url(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh Redis prefix."""
    return backend_url("redis", tmp_path, request, "idx")


@pytest.fixture
def st(url: str) -> Iterator[Store]:
    """A store whose key 'a' has 3 versions among 200 changes of another key."""
    s = Store(url, "ns")
    for i in range(100):
        s.write("b", i)
        if i in (10, 50, 90):
            s.write("a", i)
        s.write("b", -i)
    yield s
    s.close()


def _commands(st: Store, fn: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``fn()``'s result and the commands the server ran on this prefix meanwhile."""
    db = st.storage.db
    token = f"end-{uuid.uuid4().hex}"
    seen: list[str] = []
    ready = threading.Event()

    def monitor() -> None:
        with db.client.monitor() as m:
            ready.set()
            for event in m.listen():
                if token in event["command"]:
                    return
                if db.prefix in event["command"]:
                    seen.append(event["command"])

    t = threading.Thread(target=monitor)
    t.start()
    assert ready.wait(10)
    out = fn()
    db.client.echo(token)
    t.join(10)
    return out, seen


def _log_reads(commands: list[str]) -> list[str]:
    """The log entries the commands read: each XRANGE must name one entry."""
    reads = [c for c in commands if c.startswith("XRANGE") and ":log " in c]
    for c in reads:
        first, last = c.split()[2:4]
        assert first == last, f"a range read of the log: {c}"
    return [c.split()[2] for c in reads]


def test_history_reads_only_the_keys_own_entries(st: Store) -> None:
    """Three versions among 203 changes: three log entries read, in one round trip."""
    trips = st.storage.db.round_trips
    changes, commands = _commands(st, lambda: st.history("a"))
    assert [c.value for c in changes] == [10, 50, 90]
    assert _log_reads(commands) == [f"{c.revision}-1" for c in changes]
    assert st.storage.db.round_trips - trips == 1


def test_read_at_reads_one_entry(st: Store) -> None:
    """A revision between two versions: the earlier one, one log entry read."""
    a = st.history("a")
    middle = (a[0].revision + a[1].revision) // 2
    got, commands = _commands(st, lambda: st.read_at("a", middle))
    assert got is not None and got.value == 10
    assert _log_reads(commands) == [f"{a[0].revision}-1"]
    assert st.read_at("a", a[0].revision - 1) is None
    assert st.read_at("a", 10_000).value == 90  # type: ignore[union-attr]


def test_compaction_keeps_the_index_in_step(st: Store) -> None:
    """After compaction the index holds exactly the kept entries; a removed revision of a
    key still raises CompactedError naming the oldest kept."""
    db = st.storage.db
    index, log = db.key("state", "{ns}") + ":index", db.key("state", "{ns}") + ":log"
    a = st.history("a")
    assert db.client.zcard(index) == db.client.xlen(log) == 203
    assert st.compact(keep=1) == 201
    assert db.client.zcard(index) == db.client.xlen(log) == 2
    assert [c.value for c in st.history("a")] == [90]
    with pytest.raises(CompactedError) as info:
        st.read_at("a", a[0].revision)
    assert info.value.oldest == a[2].revision


def test_a_namespace_logged_before_the_index_is_indexed_in_place(url: str) -> None:
    """A prefix marked with layout 1 whose namespace has a log but no index: opening it
    indexes every kept change once, marks the prefix layout 2, and history reads as before;
    an older surefoot then refuses the prefix."""
    old = Store(url, "ns")
    for i in range(5):
        old.write("a", i)
        old.write("b", i)
    old.compact(keep=3)
    before = [(c.revision, c.value) for c in old.history("a")]
    db = old.storage.db
    db.client.delete(db.key("state", "{ns}") + ":index")  # as layout 1 left it
    db.client.hdel(db.key("state", "{ns}") + ":meta", "index")
    db.client.set(db.key("layout"), "1")
    old.close()

    st = Store(url, "ns")
    assert st.storage.db.client.get(st.storage.db.key("layout")) == "2"
    assert [(c.revision, c.value) for c in st.history("a")] == before
    assert st.read_at("a", before[0][0]).value == before[0][1]  # type: ignore[union-attr]
    with pytest.raises(CompactedError):
        st.read_at("a", 1)
    st.write("a", 5)
    assert [c.value for c in st.history("a")] == [2, 3, 4, 5]
    st.close()

    layout = _client.LAYOUT
    try:
        _client.LAYOUT = 1  # what an older surefoot compares with
        with pytest.raises(SchemaVersionError, match="newer surefoot"):
            storage.open(url)
    finally:
        _client.LAYOUT = layout
