"""History, deletes, TTLs, watches and transactions (issue 14): one contract, four backends.

Every write, merge, delete and expiry is logged by revision in the transaction that makes it;
history lists a key's versions with authors and trust labels, compaction trims the log and a
reader of a removed revision hears ``CompactedError``; a watch delivers every change in
revision order and a watcher killed with SIGKILL and restarted from its last revision misses
nothing and repeats nothing; a transaction applies its branch all at once or not at all.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, backend_url

from surefoot.clock import FakeClock
from surefoot.errors import CompactedError, ConfigError, ConflictError, ScopeError
from surefoot.statebus import Store


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each backend."""
    return str(request.param)


@pytest.fixture
def url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh storage URL on the backend."""
    return backend_url(kind, tmp_path, request, "hist")


@pytest.fixture
def st(url: str) -> Any:
    """A Store on a fake clock with a trusted and an untrusted agent."""
    s = Store(url, f"h-{uuid.uuid4().hex}", clock=FakeClock())
    s.register_agent("ann")
    s.register_agent("web", trust="untrusted")
    yield s
    s.close()


def _clock(st: Store) -> FakeClock:
    assert isinstance(st.clock, FakeClock)
    return st.clock


# -- history ---------------------------------------------------------------------------------


def test_every_change_is_logged_with_its_author_and_trust(st: Store) -> None:
    """Writes, a merge and a delete: one logged change per revision, labels kept."""
    st.declare_merge("n", "add")
    st.write("report", "v1", author="ann")
    st.write("report", "v2", author="web")
    st.merge("n", 3, author="ann")
    st.delete("report", author="ann")
    got = [
        (c.revision, c.key, c.kind, c.value, c.version, c.author, c.trust)
        for c in st.watch(timeout=0.05)
    ]
    assert got == [
        (1, "report", "put", "v1", 1, "ann", "trusted"),
        (2, "report", "put", "v2", 2, "web", "untrusted"),
        (3, "n", "merge", 3, 1, "ann", "trusted"),
        (4, "report", "delete", None, 3, "ann", "trusted"),
    ]
    assert [(c.version, c.author) for c in st.history("report")] == [
        (1, "ann"),
        (2, "web"),
        (3, "ann"),
    ]


def test_read_at_a_revision(st: Store) -> None:
    """A key reads as it was at any revision; before it existed and after its delete, None."""
    st.write("other", 0)
    st.write("k", "a")  # revision 2
    st.write("other", 1)
    st.write("k", "b")  # revision 4
    st.delete("k")  # revision 5
    assert st.read_at("k", 1) is None
    assert [st.read_at("k", r).value for r in (2, 3, 4)] == ["a", "a", "b"]  # type: ignore[union-attr]
    assert st.read_at("k", 5) is None and st.read("k") is None
    with pytest.raises(ConfigError, match="revision"):
        st.read_at("k", -1)


def test_list_merges_keep_each_version_in_history(st: Store) -> None:
    """An append key's versions read back as the list at that version, even after a delete."""
    st.declare_merge("f", "append")
    for x in ("a", "b", "c"):
        st.merge("f", x)
    assert [c.value for c in st.history("f")] == [["a"], ["a", "b"], ["a", "b", "c"]]
    st.delete("f")
    st.merge("f", "z")
    assert st.read("f").value == ["z"]  # type: ignore[union-attr]
    assert [c.value for c in st.history("f")] == [["a"], ["a", "b"], ["a", "b", "c"], None, ["z"]]
    assert st.read_at("f", 2).value == ["a", "b"]  # type: ignore[union-attr]


def test_a_write_is_logged_in_its_own_commit_on_sqlite(tmp_path: Path) -> None:
    """On SQLite a versioned write, its log entry and its expiry sweep are one commit."""
    s = Store(f"sqlite:///{tmp_path / 'c.db'}", "c", clock=FakeClock())
    db = s.storage.db
    s.write("k", 1)
    before = db.commits
    for v in range(2, 12):
        s.write("k", v, expect=v - 1)
    assert db.commits - before == 10
    assert len(s.history("k")) == 11
    s.close()


def test_compaction_keeps_the_last_n_and_names_the_oldest_kept(st: Store) -> None:
    """keep=2: older versions are gone; reading one or watching from before raises."""
    for v in range(5):
        st.write("k", v)  # revisions 1..5
    st.write("j", "x")  # revision 6: a key with one change keeps it
    assert st.compact(keep=2) == 3
    assert [c.revision for c in st.history("k")] == [4, 5]
    assert st.read_at("k", 4).value == 3  # type: ignore[union-attr]
    with pytest.raises(CompactedError) as ei:
        st.read_at("k", 2)
    assert ei.value.oldest == 4 and "oldest revision kept is 4" in str(ei.value)
    with pytest.raises(CompactedError):
        list(st.watch(after_revision=1, timeout=0.05))
    assert [c.revision for c in st.watch(after_revision=3, timeout=0.05)] == [4, 5, 6]
    assert st.compact(keep=2) == 0


def test_compaction_by_age_uses_the_store_clock(st: Store) -> None:
    """older_than drops changes older than that by the store's clock; the latest stays."""
    clock = _clock(st)
    st.write("k", 1)
    clock.advance(100)
    st.write("k", 2)
    st.write("j", 1)
    clock.advance(10)
    assert st.compact(older_than=50) == 1
    assert [c.value for c in st.history("k")] == [2]
    assert [c.value for c in st.history("j")] == [1]
    with pytest.raises(ConfigError, match="keep"):
        st.compact()


# -- deletes and TTLs ------------------------------------------------------------------------


def test_delete_is_a_versioned_tombstone(st: Store) -> None:
    """A stale delete conflicts like a stale write; a delete is a version; create again."""
    st.write("k", "a")
    st.write("k", "b", author="ann")
    with pytest.raises(ConflictError) as ei:
        st.delete("k", expect=1)
    assert (ei.value.version, ei.value.value, ei.value.author) == (2, "b", "ann")
    assert st.read("k").value == "b"  # type: ignore[union-attr]
    ch = st.delete("k", expect=2, author="ann")
    assert ch is not None and (ch.kind, ch.version, ch.author) == ("delete", 3, "ann")
    assert st.read("k") is None and "k" not in st.snapshot()
    assert st.delete("k") is None  # nothing to delete: nothing written
    assert st.revision == 3
    with pytest.raises(ConflictError):
        st.write("k", "late", expect=2)  # the writer read version 2, which is gone
    e = st.write("k", "again", expect=0)
    assert (e.version, e.value) == (4, "again")


def test_ttl_expiry_is_visible_in_reads_history_and_watches(st: Store) -> None:
    """A key written with ttl= reads as absent once the store clock passes it, and its
    expiry is logged (by the next write, or by expire()/a watch)."""
    clock = _clock(st)
    st.write("session", "s1", ttl=10)
    st.write("keep", 1)
    clock.advance(9.5)
    assert st.read("session").value == "s1"  # type: ignore[union-attr]
    clock.advance(1.0)
    assert st.read("session") is None and list(st.snapshot()) == ["keep"]
    changes = list(st.watch("session", timeout=0.05))
    assert [(c.kind, c.version, c.author) for c in changes] == [
        ("put", 1, "system"),
        ("expire", 2, "system"),
    ]
    assert st.expire() == 0  # the watch swept it already
    assert st.write("session", "s2", expect=0).version == 3
    with pytest.raises(ConfigError, match="ttl"):
        st.write("x", 1, ttl=0)


@pytest.mark.parametrize("how", ["last-writer-wins", "create", "versioned", "fenced"])
def test_a_write_sweeps_expired_keys_first(st: Store, how: str) -> None:
    """The expiry takes its revision before the write that found it due, however the
    write is conditioned (SQLite writes in one statement when nothing is due, and must
    not take its revision ahead of the expiries when something is)."""
    clock = _clock(st)
    lease = st.acquire("job", "system", ttl=1000) if how == "fenced" else None
    c = st.write("c", 0) if how in ("versioned", "fenced") else None
    a = st.write("a", 1, ttl=1)
    st.write("b", 1, ttl=2)
    clock.advance(5)
    if how == "create":
        st.write("c", 1, expect=0)
    elif how == "versioned":
        st.write("c", 1, expect=c.version)  # type: ignore[union-attr]
    elif how == "fenced":
        st.write("c", 1, expect=c.version, fence=lease)  # type: ignore[union-attr]
    else:
        st.write("c", 1)
    kinds = [(c.key, c.kind) for c in st.watch(timeout=0.05, after_revision=a.revision - 1)]
    assert kinds == [("a", "put"), ("b", "put"), ("a", "expire"), ("b", "expire"), ("c", "put")]
    assert st.read("c").value == 1  # type: ignore[union-attr]


# -- watches ---------------------------------------------------------------------------------


def test_watch_resumes_from_its_last_revision_with_no_gap_and_no_repeat(st: Store) -> None:
    """A watch stopped after 3 changes and restarted from its revision gets the rest once;
    a prefix watch sees only its keys."""
    for i in range(5):
        st.write(f"task/{i}", i)
        st.write(f"other/{i}", i)
    w = st.watch("task/", timeout=0.05)
    first = [next(w) for _ in range(3)]
    assert [c.key for c in first] == ["task/0", "task/1", "task/2"]
    rest = list(st.watch("task/", after_revision=w.revision, timeout=0.05))
    assert [c.key for c in rest] == ["task/3", "task/4"]


def test_a_blocked_watch_wakes_on_a_commit_from_another_thread(url: str) -> None:
    """The watch blocks in the backend (condition, data_version, LISTEN, XREAD) and wakes
    for a change committed by another Store while it waits."""
    ns = f"w-{uuid.uuid4().hex}"
    a = Store(url, ns)
    b = Store(a.storage if url == "memory://" else url, ns)
    got: list[Any] = []

    def watcher() -> None:
        for c in a.watch("k", timeout=10, poll=5):
            got.append(c.value)
            if len(got) == 2:
                return

    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.2)
    b.write("k", "one")
    b.write("k", "two")
    t.join(15)
    assert got == ["one", "two"]
    a.close()
    b.close()


def test_async_watch(st: Store) -> None:
    """``async for`` delivers the same changes in the same order."""
    for i in range(3):
        st.write("k", i)

    async def collect() -> list[int]:
        return [c.revision async for c in st.watch(timeout=0.05)]

    assert asyncio.run(collect()) == [1, 2, 3]


_WATCHER = textwrap.dedent(
    """
    import sys
    from surefoot.statebus import Store
    url, ns, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
    st = Store(url, ns)
    for c in st.watch("job/", after_revision=after, poll=0.05):
        print(c.revision, flush=True)
    """
)


def _watcher(url: str, ns: str, after: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHER, url, ns, str(after)],
        stdout=subprocess.PIPE,
        text=True,
    )


def _read_until(proc: subprocess.Popen[str], seen: list[int], n: int) -> None:
    assert proc.stdout is not None
    while len(seen) < n:
        line = proc.stdout.readline()
        assert line, "the watcher exited early"
        seen.append(int(line))


def test_a_killed_watcher_restarted_from_its_last_revision_misses_nothing(
    kind: str, url: str
) -> None:
    """SIGKILL a watching process mid-stream, restart it from the last revision it printed:
    the two runs together saw every change exactly once, in order."""
    if kind == "memory":
        pytest.skip("memory:// is one process's store; nothing to watch from another")
    ns = f"k-{uuid.uuid4().hex}"
    st = Store(url, ns)
    seen: list[int] = []
    first = _watcher(url, ns, 0)
    try:
        for i in range(20):
            st.write(f"job/{i}", i)
            st.write(f"noise/{i}", i)  # not under the prefix: never delivered
        _read_until(first, seen, 5)
    finally:
        os.kill(first.pid, signal.SIGKILL)  # mid-stream, by pid
        first.wait(10)
    assert first.stdout is not None
    seen += [int(line) for line in first.stdout.read().split()]  # all it printed before dying
    first.stdout.close()
    for i in range(20, 30):  # written while no watcher runs
        st.write(f"job/{i}", i)
    second = _watcher(url, ns, seen[-1])
    try:
        for i in range(30, 40):
            st.write(f"job/{i}", i)
        _read_until(second, seen, 40)
    finally:
        os.kill(second.pid, signal.SIGKILL)
        second.wait(10)
        assert second.stdout is not None
        second.stdout.close()
    st.close()
    jobs = list(range(1, 40, 2)) + list(range(41, 61))  # job/0..19 interleaved, then 20..39
    assert seen == jobs


# -- transactions ----------------------------------------------------------------------------


def test_txn_writes_together_when_every_compare_holds(st: Store) -> None:
    """The report and its status are written together, at consecutive revisions."""
    st.write("report", "draft")
    st.write("old", 1)
    r = st.txn(
        {"report": 1, "status": 0},
        [("put", "report", "final"), ("put", "status", "done", 30), ("delete", "old")],
        author="ann",
    )
    assert r.succeeded and r.conflict is None
    assert [(c.key, c.kind, c.revision, c.author) for c in r.changes] == [
        ("report", "put", 3, "ann"),
        ("status", "put", 4, "ann"),
        ("old", "delete", 5, "ann"),
    ]
    assert st.read("report").value == "final" and st.read("status").value == "done"  # type: ignore[union-attr]
    assert st.read("status").expires_at == st.clock.now() + 30  # type: ignore[union-attr]
    assert st.read("old") is None


def test_a_failed_compare_applies_nothing_and_names_the_key(st: Store) -> None:
    """One stale compare: no success operation lands, the failure branch does instead."""
    st.write("report", "draft")
    st.write("status", "open", author="web")
    r = st.txn(
        {"report": 1, "status": 0},
        [("put", "report", "final"), ("put", "status", "done")],
        [("put", "alarm", "status changed")],
    )
    assert not r.succeeded and r.conflict is not None
    assert (r.conflict.key, r.conflict.version, r.conflict.value) == ("status", 1, "open")
    assert r.conflict.author == "web" and "not absent" in str(r.conflict)
    assert r.conflict.kind == "transaction"
    assert [c.key for c in r.changes] == ["alarm"]
    assert st.read("report").value == "draft" and st.read("status").value == "open"  # type: ignore[union-attr]
    assert st.revision == 3


def test_txn_refuses_bad_operations_before_writing(st: Store) -> None:
    """A key twice in a branch, a merge key or an unknown op: ConfigError, nothing written."""
    st.declare_merge("m", "add")
    with pytest.raises(ConfigError, match="twice"):
        st.txn({}, [("put", "a", 1), ("delete", "a")])
    with pytest.raises(ConfigError, match="merge key"):
        st.txn({}, [("put", "m", 1)])
    with pytest.raises(ConfigError, match="operation"):
        st.txn({}, [("upsert", "a", 1)])
    assert st.revision == 0


def test_a_fenced_delete_is_refused_once_the_lease_moved_on(st: Store) -> None:
    """A zombie holding an old lease cannot delete: the fence holds for deletes too."""
    clock = _clock(st)
    st.write("report", "r1")
    old = st.acquire("report", "ann", 2.0)
    assert old is not None
    clock.advance(3.0)
    new = st.acquire("report", "web", 2.0)
    assert new is not None
    with pytest.raises(ConflictError) as ei:
        st.delete("report", fence=old)
    assert "lease" in str(ei.value)
    assert st.read("report").value == "r1"  # type: ignore[union-attr]
    assert st.delete("report", fence=new) is not None
    kinds = [c.key for c in st.watch(timeout=0)]
    assert kinds == ["report", "report"]  # the lease keys' changes are not shown
    assert [c.key for c in st.watch("_lease/", timeout=0)] == ["_lease/report"] * 2


def test_deletes_and_expiries_keep_lost_update_accounting(st: Store) -> None:
    """A last-writer-wins write over an unseen version still counts one lost update after
    the key is deleted; deleting loses nothing more."""
    st.write("k", 1)
    st.write("k", 2)
    st.write("k", 3, seen=1)  # based on version 1: version 2's change is lost
    assert st.lost_updates == 1
    st.delete("k")
    st.write("t", 1, ttl=1)
    _clock(st).advance(2)
    st.expire()
    assert st.lost_updates == 1


def test_sessions_delete_and_read_history_within_their_scopes(st: Store) -> None:
    """A session deletes only in its write scope (the tombstone names it) and reads history
    only in its read scope; history with an untrusted version taints the reader."""
    st.register_agent("bot", read=["notes/*"], write=["notes/*"])
    bot, web = st.session("bot"), st.session("web")
    web.write("notes/a", "from the web")
    st.write("secret", "s")
    assert bot.delete("notes/a").author == "bot"  # type: ignore[union-attr]
    with pytest.raises(ScopeError):
        bot.delete("secret")
    with pytest.raises(ScopeError):
        bot.history("secret")
    assert not bot.tainted
    assert [c.kind for c in bot.history("notes/a")] == ["put", "delete"]
    assert bot.tainted  # it read the web agent's version
    assert st.read("secret").value == "s"  # type: ignore[union-attr]
