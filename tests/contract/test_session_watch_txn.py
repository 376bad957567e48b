"""Sessions watch and transact within their scopes, with trust labels kept, on every backend:
a session's watch delivers only keys it may read (and is tainted by what it delivers), resumes
with no gap and no repeat, wakes for another process's commit; a session's transaction is
refused outside its scopes and stores a tainted session's values tainted."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, backend_url

from surefoot.clock import FakeClock
from surefoot.errors import ScopeError
from surefoot.guard import label_of
from surefoot.statebus import Store


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each backend."""
    return str(request.param)


@pytest.fixture
def url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh storage URL on the backend."""
    return backend_url(kind, tmp_path, request, "sess")


def _team(st: Store) -> Store:
    st.register_agent("bot", read=["notes/*"], write=["notes/*"])
    st.register_agent("web", trust="untrusted")
    return st


@pytest.fixture
def st(url: str) -> Any:
    """A Store on a fake clock with a scoped agent and an untrusted one."""
    s = _team(Store(url, f"s-{uuid.uuid4().hex}", clock=FakeClock()))
    yield s
    s.close()


def test_a_session_watch_delivers_only_its_scope_and_is_tainted_by_it(st: Store) -> None:
    """Out-of-scope keys under the prefix are skipped; the web agent's note taints."""
    st.write("notes/a", 1)
    st.write("nothing", "hidden")
    st.session("web").write("notes/b", "planted")
    st.write("notes/c", 3, ttl=5)
    assert isinstance(st.clock, FakeClock)
    st.clock.advance(6)  # notes/c expires: the watch sweeps it and delivers the expiry
    bot = st.session("bot")
    got = [(c.key, c.kind, c.value) for c in bot.watch("no", timeout=0)]
    assert got == [
        ("notes/a", "put", 1),
        ("notes/b", "put", "planted"),
        ("notes/c", "put", 3),
        ("notes/c", "expire", None),
    ]
    assert bot.context.tainted == frozenset({"web"})
    with pytest.raises(ScopeError):
        bot.watch("secret")


def test_a_resumed_session_watch_misses_nothing_and_repeats_nothing(st: Store) -> None:
    """Resumed from ``watch.revision`` after each delivery, across out-of-scope changes and a
    batch smaller than the gap between in-scope ones, every note comes once, in order."""
    for i in range(6):
        st.write(f"notes/{i}", i)
        for j in range(3):
            st.write(f"nope/{i}/{j}", j)
    bot = st.session("bot")
    seen: list[int] = []
    after = 0
    while True:
        w = bot.watch("n", after_revision=after, timeout=0, batch=2)
        c = next(iter(w), None)
        if c is None:
            break
        seen.append(c.value)
        after = w.revision
    assert seen == list(range(6))


def test_a_blocked_session_watch_wakes_for_another_stores_commit(kind: str, url: str) -> None:
    """Blocked in the backend, the session's watch wakes for a commit of another Store and
    delivers the in-scope change only."""
    ns = f"w-{uuid.uuid4().hex}"
    a = _team(Store(url, ns))
    b = Store(a.storage if kind == "memory" else url, ns)
    got: list[Any] = []
    bot = a.session("bot")

    def watcher() -> None:
        for c in bot.watch(timeout=10, poll=5):
            got.append(c.value)
            return

    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.2)
    b.write("secret", "not for bot")
    b.write("notes/x", "for bot")
    t.join(15)
    assert got == ["for bot"]
    a.close()
    b.close()


def test_a_tainted_session_transacts_with_its_taint(st: Store) -> None:
    """The values of a trusted agent that read the web are stored tainted, in one
    transaction; keys outside its write scope are refused before anything is written."""
    st.session("web").write("notes/src", "planted")
    bot = st.session("bot")
    bot.read("notes/src")
    before = st.revision
    with pytest.raises(ScopeError, match="'status'"):
        bot.txn({"notes/report": 0}, [("put", "notes/report", "x"), ("put", "status", "done")])
    assert st.revision == before
    r = bot.txn({"notes/report": 0}, [("put", "notes/report", "final"), ("delete", "notes/src")])
    assert r.succeeded and [(c.key, c.kind, c.author) for c in r.changes] == [
        ("notes/report", "put", "bot"),
        ("notes/src", "delete", "bot"),
    ]
    e = st.read("notes/report")
    assert e is not None and e.value == "final" and label_of(e).tainted == frozenset({"web"})
    history = st.history("notes/report")
    assert history[-1].label is not None and history[-1].label.tainted == frozenset({"web"})
