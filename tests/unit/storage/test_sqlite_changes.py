"""A blocked SQLite wait wakes on the commit, not on a 5 ms poll (``storage/sqlite/_changes``):
counted in looks at ``PRAGMA data_version`` (never timed): few while nothing is written, a
bounded number while another stream of the file is busy, and the wait still works where
inotify is not available."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from surefoot.statebus import Store, Stream
from surefoot.storage.sqlite import _changes
from surefoot.storage.sqlite._changes import FileChanges

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def _looks(store: Stream | Store) -> list[str]:
    """Count the looks at data_version on this thread's connection."""
    seen: list[str] = []
    store.storage.db.conn().set_trace_callback(
        lambda sql: seen.append(sql) if "data_version" in sql else None
    )
    return seen


@linux
def test_a_watch_sees_the_files_writes_and_not_its_neighbours(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    w = FileChanges.open(str(db))
    assert w is not None
    try:
        (tmp_path / "other.txt").write_text("x")
        assert not w.wait(0.05)  # another file of the folder: read and passed over
        (tmp_path / "s.db-wal").write_bytes(b"x")
        assert w.wait(1.0)
        assert not w.wait(0.05)  # that write's events were read: nothing left to report
        (tmp_path / "s.db").write_bytes(b"x")
        assert w.wait(1.0)  # the file itself (no WAL) counts too
    finally:
        w.close()


@linux
def test_an_idle_blocked_fetch_looks_a_few_times_a_second_not_every_5_ms(tmp_path: Path) -> None:
    s = Stream(f"sqlite:///{tmp_path / 's.db'}", "quiet")
    c = s.consumer("c")
    looks = _looks(s)
    t0 = time.monotonic()
    assert c.fetch(1, block=1.0) == []
    assert time.monotonic() - t0 >= 1.0
    # 1 s of polling every 5 ms was ~200 looks; asleep on the watch: a new watch's first
    # windows (HOT / HOT_POLL, then CEILING / POLL) and one per CEILING after them.
    first = _changes.HOT / _changes.HOT_POLL + _changes.CEILING / _changes.POLL
    assert len(looks) <= first + 1 / _changes.CEILING + 5, len(looks)
    s.close()


@linux
def test_a_busy_file_does_not_make_a_blocked_reader_look_more_than_polling_did(
    tmp_path: Path,
) -> None:
    """Another stream of the file appended to as fast as one thread can for 1 s: the blocked
    consumer of a quiet stream backs off to one look every POLL (as polling did), not one
    per commit, and returns when its own message comes."""
    url = f"sqlite:///{tmp_path / 's.db'}?synchronous=NORMAL"
    quiet = Stream(url, "quiet")
    c = quiet.consumer("c")
    looks = _looks(quiet)
    stop = threading.Event()
    commits = [0]

    def busy() -> None:
        other = Stream(url, "busy")
        while not stop.is_set():
            other.append(commits[0], message_id=f"m{commits[0]}")
            commits[0] += 1
        other.append("done", message_id="done")
        Stream(url, "quiet").append("yours", message_id="yours")

    t = threading.Thread(target=busy)
    t.start()
    threading.Timer(1.0, stop.set).start()
    got = c.fetch(1, block=10.0)
    t.join()
    assert [m.payload for m in got] == ["yours"]
    assert commits[0] > 500  # the file really was busy
    assert len(looks) <= 1.5 / _changes.POLL, (len(looks), commits[0])
    quiet.close()


def test_without_inotify_a_wait_polls_and_still_wakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FileChanges, "open", classmethod(lambda cls, path: None))
    url = f"sqlite:///{tmp_path / 's.db'}"
    st, other = Store(url, "ns"), Store(url, "ns")
    st.write("k", 0)
    looks = _looks(st)
    writer = threading.Timer(0.2, lambda: other.write("k", 1))
    writer.start()
    first = next(st.watch("k", after_revision=1, timeout=5.0))
    assert (first.key, first.version) == ("k", 2)
    assert len(looks) >= 10  # it polled (every POLL) until the write came
    writer.join()  # the write is seen once committed, while other.write may still be returning
    st.close()
    other.close()
