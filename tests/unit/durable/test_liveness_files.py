"""SQLite liveness files: a killed worker's lock file is swept once none of its runs is
running, never while a process holds it, and a sweep racing a holder or a checker leaves
neither a holder on an unlinked file nor a live holder reported dead."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App
from surefoot.storage.sqlite import _liveness
from surefoot.storage.sqlite._liveness import FileLiveness

LEASE = 600.0


def _kill(lv: FileLiveness, worker_id: str) -> None:
    """Let go of a held lock as a killed process does: the file stays, unlocked."""
    os.close(lv._held.pop(worker_id))


def _idle(ids: Any) -> set[str]:
    return set()


def test_a_dead_idle_workers_file_is_swept_a_live_ones_never(tmp_path: Path) -> None:
    """Only the file no process holds, of a worker with no running run, goes."""
    db = tmp_path / "runs.db"
    db.touch()
    a, b, sweeper = FileLiveness(str(db)), FileLiveness(str(db)), FileLiveness(str(db))
    assert a.hold("dead") and b.hold("alive")
    _kill(a, "dead")
    assert sweeper.sweep(lambda ids: {"dead"}) == []  # it still holds a running run
    assert os.path.exists(sweeper.path("dead"))
    assert sweeper.sweep(_idle) == ["dead"]
    assert not os.path.exists(sweeper.path("dead"))
    assert os.path.exists(sweeper.path("alive"))
    assert sweeper.dead({"alive"}) == set()
    b.close()


def test_a_holder_whose_file_was_swept_before_it_locked_opens_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep unlinks the file between the holder's open and its lock: the holder sees
    the path no longer names its file and holds a fresh one, so a checker finds it."""
    db = tmp_path / "runs.db"
    db.touch()
    old, holder, sweeper = FileLiveness(str(db)), FileLiveness(str(db)), FileLiveness(str(db))
    assert old.hold("w")
    _kill(old, "w")  # a previous life of worker w left its file
    real = _liveness.fcntl.flock
    swept: list[list[str]] = []

    def flock(fd: int, op: int) -> None:
        if op & _liveness.fcntl.LOCK_EX and not swept:
            monkeypatch.setattr(_liveness.fcntl, "flock", real)
            swept.append(sweeper.sweep(_idle))  # just before the holder's lock
        real(fd, op)

    monkeypatch.setattr(_liveness.fcntl, "flock", flock)
    assert holder.hold("w")
    assert swept == [["w"]]
    path = holder.path("w")
    assert os.path.exists(path)
    assert os.stat(path).st_ino == os.fstat(holder._held["w"]).st_ino
    assert sweeper.dead({"w"}) == set()  # held: alive
    _kill(holder, "w")
    assert sweeper.dead({"w"}) == {"w"}  # and its death is seen


def test_a_checker_racing_a_sweep_does_not_report_a_live_holder_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checker opened the old file; it is swept and a restarted holder holds a new
    one before the checker's shared lock: the checker says nothing about it."""
    db = tmp_path / "runs.db"
    db.touch()
    old, new, sweeper, checker = (FileLiveness(str(db)) for _ in range(4))
    assert old.hold("w")
    _kill(old, "w")
    real = _liveness.fcntl.flock
    done: list[bool] = []

    def flock(fd: int, op: int) -> None:
        if op & _liveness.fcntl.LOCK_SH and not done:
            done.append(True)
            monkeypatch.setattr(_liveness.fcntl, "flock", real)
            assert sweeper.sweep(_idle) == ["w"]
            assert new.hold("w")  # the restarted worker, on a fresh file
        real(fd, op)

    monkeypatch.setattr(_liveness.fcntl, "flock", flock)
    assert checker.dead({"w"}) == set()
    assert done == [True]
    new.close()


def test_the_taker_sweeps_the_dead_holders_file_once_its_runs_moved(
    tmp_path: Path, clock: FakeClock
) -> None:
    """A worker that takes over the last running run of a dead holder removes its file;
    a worker that starts removes the files of dead idle workers."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    apps = [App(url, clock=clock, worker_id=w, lease=LEASE) for w in ("w1", "w2", "w3")]
    try:
        for a in apps:

            @a.workflow
            def flow(i: int) -> int:
                return i

        w1, w2, w3 = apps
        w1.enqueue("flow", 1, run_id="r")
        now = clock.now()
        j1: Any = w1.journal
        assert j1.liveness.hold("w1", now=now)
        assert j1.claim("w1", now=now, lease_until=now + LEASE, workflows=w1.registered(),
                        limit=1) != []  # fmt: skip
        lock = j1.liveness.locks.path("w1")
        _kill(j1.liveness.locks, "w1")
        j2: Any = w2.journal
        assert j2.liveness.hold("w2", now=now)  # sweeps: w1's run still runs, its file stays
        assert os.path.exists(lock)
        got = j2.liveness.claim_orphans("w2", now=now, lease_until=now + LEASE,
                               workflows=w2.registered(), limit=4)  # fmt: skip
        assert [r for r, _ in got] == ["r"]
        assert not os.path.exists(lock)
        idle = j2.liveness.locks.path("w2")
        _kill(j2.liveness.locks, "w2")  # w2 dies holding r: its file stays
        assert os.path.exists(idle)
        j3: Any = w3.journal
        assert j3.liveness.hold("w3", now=now)
        assert os.path.exists(idle)  # r still runs under w2
        w3.cancel("r")
        assert j3.liveness.sweep(force=True) == ["w2"]
        assert not os.path.exists(idle)
    finally:
        for a in apps:
            a.close()
