"""Lost updates of last-writer-wins, counted by the store itself, on every backend.

A version is lost when no current value descends from it: each write carries the version
its writer read plus its own change, so an append-only list keeps exactly one entry per
version of its lineage, and ``lost_updates`` must equal the entries that went missing.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, backend_url

from surefoot.statebus import Store


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A Store with agents a, b, c in a namespace of its own, on each backend."""
    st = Store(backend_url(request.param, tmp_path, request, "lost"), f"lu-{uuid.uuid4().hex}")
    for name in ("a", "b", "c"):
        st.register_agent(name)
    yield st
    st.close()


def _append(session: Any, entry: str, base: Any = None) -> Any:
    seen = base if base is not None else session.read("log")
    return session.write("log", [*seen.value, entry])


def test_a_stale_write_over_a_chain_counts_every_version_it_wiped(store: Store) -> None:
    """b reads v1, a appends five times, b writes its stale copy: 5 entries lost, 5 counted."""
    a, b = store.session("a"), store.session("b")
    store.write("log", ["x"])
    stale = b.read("log")
    for i in range(5):
        _append(a, f"a{i}")
    _append(b, "b0", base=stale)
    final = store.read("log")
    assert final is not None and final.value == ["x", "b0"]
    assert store.lost_updates == 5 == 7 - len(final.value)


def test_a_version_that_survives_through_a_later_write_is_not_lost(store: Store) -> None:
    """a and b read v1; a writes; c reads; b writes; c writes: one entry lost, one counted."""
    a, b, c = (store.session(n) for n in "abc")
    store.write("log", ["x"])
    ra, rb = a.read("log"), b.read("log")
    _append(a, "a", base=ra)
    rc = c.read("log")
    _append(b, "b", base=rb)
    assert store.lost_updates == 1  # a's entry is not in the current value
    _append(c, "c", base=rc)
    final = store.read("log")
    assert final is not None and final.value == ["x", "a", "c"]
    assert store.lost_updates == 1  # b's entry is lost; a's came back through c


def test_a_write_based_on_a_long_overwritten_chain_brings_it_back(store: Store) -> None:
    """The count is of versions missing now: restoring a wiped chain lowers it."""
    a, b, c = (store.session(n) for n in "abc")
    store.write("log", ["x"])
    stale = b.read("log")
    for i in range(4):
        _append(a, f"a{i}")
    rc = c.read("log")
    _append(b, "b", base=stale)
    assert store.lost_updates == 4
    _append(c, "c", base=rc)
    final = store.read("log")
    assert final is not None and len(final.value) == 6
    assert store.lost_updates == 1 == 7 - len(final.value)


def test_versioned_and_blind_writes_lose_nothing(store: Store) -> None:
    """expect= writes and writes with no known basis never count a loss."""
    a = store.session("a")
    store.write("log", ["x"])
    e = a.read("log")
    assert e is not None
    a.write("log", [*e.value, "y"], expect=e.version)
    store.write("log", ["z"])
    store.write("other", 1)
    assert store.lost_updates == 0


def test_every_store_object_reads_the_same_total(store: Store) -> None:
    """The count lives in the store: a second Store on the same namespace sees it."""
    a, b = store.session("a"), store.session("b")
    store.write("log", [])
    stale = b.read("log")
    _append(a, "a")
    _append(b, "b", base=stale)
    if store.storage is not None and store.storage.url.startswith("memory"):
        other = Store(store.storage, store.namespace)
    else:
        other = Store(store.storage.url, store.namespace)
    try:
        assert other.lost_updates == store.lost_updates == 1
    finally:
        if other.storage is not store.storage:
            other.close()


_APPENDER = textwrap.dedent(
    """
    import sys, time
    from surefoot.statebus import Store
    url, ns, me, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    st = Store(url, ns)
    st.register_agent(me)
    s = st.session(me)
    for i in range(n):
        e = s.read("log")
        time.sleep(0.0005)  # a model call, shortened
        s.write("log", [*e.value, f"{me}-{i}"])
    print(st.lost_updates)
    st.close()
    """
)


@pytest.mark.parametrize("kind", BACKENDS)
def test_four_writers_report_exactly_the_entries_lost(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """4 writers × 60 last-writer-wins appends (processes; threads on memory): the store's
    count equals 240 minus the entries left, and every writer reads that same total."""
    url = backend_url(kind, tmp_path, request, "lost4")
    ns, n = f"lu4-{uuid.uuid4().hex}", 60
    st = Store(url, ns)
    st.write("log", [])
    if kind == "memory":
        outs: list[str] = []

        def worker(me: str) -> None:
            st.register_agent(me)
            s = st.session(me)
            for i in range(n):
                e = s.read("log")
                assert e is not None
                s.write("log", [*e.value, f"{me}-{i}"])

        threads = [threading.Thread(target=worker, args=(f"p{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _APPENDER, url, ns, f"p{i}", str(n)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        try:
            outs = [p.communicate(timeout=120)[0] for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        assert all(p.returncode == 0 for p in procs)
    final = st.read("log")
    assert final is not None and final.version == 4 * n + 1
    lost = 4 * n - len(final.value)
    assert st.lost_updates == lost
    assert final.version - (final.lineage or 0) == lost
    assert all(o.strip().lstrip("-").isdigit() for o in outs)  # each writer could read it
    st.close()
