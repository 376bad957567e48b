"""Liveness: a SIGKILLed worker's run is taken over by a running worker long before its
lease (600 s) could expire; a stopped (SIGSTOP) but living worker's run is not.

Real worker processes, on SQLite (lock files) and PostgreSQL (advisory locks). No timing is
asserted: the lease is far longer than the test, and the audit says why the run moved.
"""

from __future__ import annotations

import importlib.util
import os
import signal
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
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ModuleType, str, dict[str, subprocess.Popen[bytes]]]]:
    """The app on a fresh journal, and the worker processes the test starts (killed by pid
    at the end)."""
    url = backend_url(request.param, tmp_path, request, "live")
    mod = _load()
    mod.app.configure(url=url, worker_id="test")
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
    assert dead["holder"] == holder
    # the holder's lease had not run out when the run moved: only liveness explains it
    assert taken[0].at < before.lease_until == dead["lease_until"]
    # and the standby carries on: its steps are journalled under the new epoch
    n = len(detail.steps)
    _wait(lambda: len(app.show("r").steps) > n + 2, "the standby's steps")
    assert app.show("r").steps[-1].epoch == before.epoch + 1


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
        got = journal.claim_orphans(
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
