"""Liveness: a SIGKILLed worker's run is taken over by a running worker long before its
lease (600 s) could expire, also in a named queue (within the queue's limits, counted at
the service); a stopped (SIGSTOP) but living worker's run is not.

Real worker processes, on SQLite (lock files) and PostgreSQL (advisory locks). No timing is
asserted: the lease is far longer than the test, and the audit says why the run moved.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.contract._backends import backend_url

pytestmark = pytest.mark.crash

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"
LEASE = 600.0


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("liveness_app", HERE / "liveness_app.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["liveness_app"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(params=["sqlite", "postgresql"])
def setup(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ModuleType, str, dict[str, subprocess.Popen[bytes]]]]:
    """The app on a fresh journal, and the worker processes the test starts (killed by pid
    at the end); the service's ledger in ``SUREFOOT_LEDGER``."""
    monkeypatch.setenv("SUREFOOT_LEDGER", str(tmp_path / "ledger.db"))
    url = backend_url(request.param, tmp_path, request, "live")
    mod = _load()
    mod.app.configure(url=url, worker_id="test")
    mod.app.journal  # noqa: B018 - made before the workers start (reading makes none)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    yield mod, url, procs
    for p in procs.values():
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait(timeout=10)
    mod.app.close()
    sys.modules.pop("liveness_app", None)


def _start(url: str, procs: dict[str, subprocess.Popen[bytes]], wid: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(SRC)])}
    env.pop("SUREFOOT_CRASH", None)
    argv = [sys.executable, "-m", "surefoot", "worker", "--db", url, "--app", "liveness_app:app",
            "--lease", str(LEASE), "--poll", "0.05", "--worker-id", wid]  # fmt: skip
    procs[wid] = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)


def _wait(pred: Callable[[], Any], what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _serving(app: Any, ids: set[str]) -> bool:
    return ids <= {w.worker_id for w in app.workers() if w.seen_at >= time.time()}


def _running(mod: ModuleType, run_id: str, steps: int) -> Any:
    """Start ``run_id`` and wait until its holder journalled ``steps`` steps; its row."""
    app = mod.app
    app.enqueue(mod.long, 10_000, run_id=run_id)
    _wait(lambda: len(app.show(run_id).steps) >= steps, f"{steps} steps of {run_id}")
    return app.show(run_id).run


def test_a_killed_workers_run_is_taken_over_before_its_lease_expires(
    setup: tuple[ModuleType, str, dict[str, subprocess.Popen[bytes]]],
) -> None:
    mod, url, procs = setup
    app = mod.app
    _start(url, procs, "w0")
    _start(url, procs, "w1")
    _wait(lambda: _serving(app, {"w0", "w1"}), "both workers to serve")
    before = _running(mod, "r", 3)
    holder = str(before.owner)
    other = ({"w0", "w1"} - {holder}).pop()
    assert before.lease_until is not None and before.lease_until > time.time() + LEASE / 2
    os.kill(procs[holder].pid, signal.SIGKILL)
    procs[holder].wait(timeout=10)
    _wait(lambda: app.show("r").run.epoch != before.epoch, "the standby to take the run over")
    detail = app.show("r")
    assert detail.run.owner == other
    assert detail.run.epoch == before.epoch + 1
    taken = [e for e in detail.audit if e.action == "taken_over"]
    assert [(e.actor, e.detail["previous_epoch"], e.detail["epoch"]) for e in taken] == [
        (other, before.epoch, before.epoch + 1)
    ]
    dead = taken[0].detail["holder_dead"]
    assert dead["holder"] == holder and taken[0].detail["reason"] == "holder_dead"
    # the holder's lease had not run out when the run moved: only liveness explains it
    assert taken[0].at < before.lease_until == dead["lease_until"]
    # and the standby carries on: its steps are journalled under the new epoch
    n = len(detail.steps)
    _wait(lambda: len(app.show("r").steps) > n + 2, "the standby's steps")
    assert app.show("r").steps[-1].epoch == before.epoch + 1
    _swept(app, holder)


def _swept(app: Any, worker_id: str) -> None:
    """SQLite: the dead worker's lock file is removed once none of its runs runs."""
    liveness = app.journal.liveness
    lv = None if liveness is None else liveness.locks
    if lv is not None and lv.kind == "flock":
        path = lv.path(worker_id)
        _wait(lambda: not os.path.exists(path), f"{worker_id}'s lock file to be swept")


def test_a_stopped_workers_run_waits_for_its_lease(
    setup: tuple[ModuleType, str, dict[str, subprocess.Popen[bytes]]],
) -> None:
    """SIGSTOP freezes the holder: it keeps its lock, so neither a running standby nor a
    direct look takes its run; once it is SIGKILLed, the standby takes the run over."""
    mod, url, procs = setup
    app = mod.app
    _start(url, procs, "w0")
    _wait(lambda: _serving(app, {"w0"}), "w0 to serve")
    before = _running(mod, "s", 2)
    assert before.owner == "w0"
    os.kill(procs["w0"].pid, signal.SIGSTOP)
    _start(url, procs, "w1")
    _wait(lambda: _serving(app, {"w1"}), "w1 to serve")
    journal: Any = app.journal
    for _ in range(10):  # looks of our own, and time for w1's (every 0.2 s)
        now = time.time()
        got = journal.liveness.claim_orphans(
            "test", now=now, lease_until=now + LEASE, workflows=app.registered(), limit=4
        )
        assert got == []
        time.sleep(0.2)
    row = app.show("s").run
    assert (row.owner, row.epoch) == ("w0", before.epoch)
    assert not [e for e in app.show("s").audit if e.action == "taken_over"]
    os.kill(procs["w0"].pid, signal.SIGKILL)
    procs["w0"].wait(timeout=10)
    _wait(lambda: app.show("s").run.owner == "w1", "w1 to take the killed worker's run over")
    assert app.show("s").run.epoch == before.epoch + 1
    taken = [e for e in app.show("s").audit if e.action == "taken_over"]
    assert [e.detail["holder_dead"]["holder"] for e in taken] == ["w0"]


def _calls() -> list[tuple[int, str, str, int]]:
    path = os.environ["SUREFOOT_LEDGER"]
    if not os.path.exists(path):
        return []
    with sqlite3.connect(path, timeout=30) as c:
        try:
            return list(c.execute("SELECT id, kind, name, pid FROM calls ORDER BY id"))
        except sqlite3.OperationalError:
            return []


def _latest_in_flight(calls: list[tuple[int, str, str, int]]) -> tuple[str, int]:
    """The call in flight that entered last (the most time left before it ends)."""
    active: dict[tuple[str, int], int] = {}
    for i, kind, name, pid in calls:
        if kind == "enter":
            active[name, pid] = i
        else:
            active.pop((name, pid), None)
    return max(active, key=lambda a: active[a])


def _peaks(calls: list[tuple[int, str, str, int]], killed: int, kill_id: int) -> tuple[int, int]:
    """The most calls in flight at once at the service, and on one worker; the killed
    worker's call ends at the kill."""
    active: set[tuple[str, int]] = set()
    peak = per_worker = 0
    for i, kind, name, pid in calls:
        if i > kill_id:
            active = {a for a in active if a[1] != killed}
        if kind == "enter":
            active.add((name, pid))
        else:
            active.discard((name, pid))
        peak = max(peak, len(active))
        per_worker = max([per_worker, *(sum(1 for a in active if a[1] == p) for _, p in active)])
    return peak, per_worker


def test_a_killed_workers_queued_run_moves_at_once_within_the_queues_limits(
    setup: tuple[ModuleType, str, dict[str, subprocess.Popen[bytes]]],
) -> None:
    """Queue ``mail``: 2 at once across workers, 1 per worker, 8 starts per 600 s. Three
    workers; the holder of a call in flight is SIGKILLed: its run is taken over (audit
    ``holder_dead``) and finishes long before its 600 s lease; the service never sees more
    than 2 calls at once, nor 2 from one worker; exactly 8 runs start (the takeover is
    not a new start), the other 2 wait for the rate."""
    mod, url, procs = setup
    app = mod.app
    ids = {"w0", "w1", "w2"}
    for wid in sorted(ids):
        _start(url, procs, wid)
    _wait(lambda: _serving(app, ids), "the workers to serve")
    handles = [app.enqueue(mod.mailer, i, queue="mail", run_id=f"m{i}") for i in range(10)]
    _wait(lambda: sum(1 for c in _calls() if c[1] == "enter") >= 3, "3 calls at the service")
    name, pid = _latest_in_flight(_calls())
    victim = next(w for w, p in procs.items() if p.pid == pid)
    run_id = "m" + name.removeprefix("send")
    before = app.show(run_id).run
    assert before.owner == victim and before.status == "running"
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    procs[victim].wait(timeout=10)
    kill_id = max(c[0] for c in _calls())
    assert ("exit", name, pid) not in [c[1:] for c in _calls()]  # killed inside the call
    _wait(lambda: sum(h.status() == "succeeded" for h in handles) == 8, "8 runs to succeed")
    assert sorted(h.status() for h in handles) == ["pending"] * 2 + ["succeeded"] * 8
    after = app.show(run_id)
    assert after.run.status == "succeeded"
    taken = [e for e in after.audit if e.action == "taken_over"]
    assert [e.detail["holder_dead"]["holder"] for e in taken] == [victim]
    assert [e.detail["reason"] for e in taken] == ["holder_dead"]
    assert taken[0].at < before.lease_until  # only liveness explains it
    peak, per_worker = _peaks(_calls(), pid, kill_id)
    assert peak <= 2 and per_worker <= 1
    started = [e for h in handles for e in app.show(h.run_id).audit if e.action == "claimed"]
    assert len(started) == 8
    _swept(app, victim)
    print(f"queued run taken over {taken[0].at - killed_at:.3f} s after the SIGKILL")
