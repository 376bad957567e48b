"""Under SIGKILL: queue limits, child runs and ``patched()`` markers hold across a killed
worker."""

from __future__ import annotations

import importlib.util
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from surefoot import storage

pytestmark = pytest.mark.crash

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("queue_child_app", HERE / "queue_child_app.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["queue_child_app"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(params=["sqlite", "postgresql"])
def setup(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ModuleType, str, Path]]:
    """The app on a fresh journal (SQLite file or PostgreSQL schema) and a ledger file."""
    ledger = tmp_path / "ledger.db"
    monkeypatch.setenv("SUREFOOT_LEDGER", str(ledger))
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        url = f"{request.getfixturevalue('pg_url')}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    mod = _load()
    mod.app.configure(url=url)
    yield mod, url, ledger
    mod.app.close()
    if request.param == "postgresql":
        st: Any = storage.open(url)
        st.db.drop_schema()
        st.close()


class Workers:
    """Worker processes this test started; each is stopped by its pid at the end."""

    def __init__(self, url: str, ledger: Path) -> None:
        self.url, self.ledger = url, ledger
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, worker_id: str, crash: str | None = None) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE), str(SRC)]),
            "SUREFOOT_LEDGER": str(self.ledger),
        }
        env.pop("SUREFOOT_CRASH", None)
        if crash is not None:
            env["SUREFOOT_CRASH"] = crash
        cmd = [sys.executable, "-m", "surefoot", "worker", "--db", self.url, "--app"]
        cmd += ["queue_child_app:app", "--lease", "1.0", "--poll", "0.05"]
        cmd += ["--worker-id", worker_id]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)


@pytest.fixture
def workers(setup: tuple[ModuleType, str, Path]) -> Iterator[Workers]:
    w = Workers(setup[1], setup[2])
    yield w
    w.close()


def _calls(ledger: Path) -> list[tuple[int, str, str, int]]:
    if not ledger.exists():
        return []
    with sqlite3.connect(ledger, timeout=30) as c:
        try:
            return list(c.execute("SELECT id, kind, name, pid FROM calls ORDER BY id"))
        except sqlite3.OperationalError:
            return []


def _wait(pred: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _peak(calls: list[tuple[int, str, str, int]], killed: int, kill_id: int) -> int:
    """Most sends in flight at once; the killed worker's end at the kill."""
    active: set[tuple[str, int]] = set()
    peak = 0
    for i, kind, name, pid in calls:
        if i > kill_id:
            active = {a for a in active if a[1] != killed}
        if kind == "enter":
            active.add((name, pid))
        elif kind == "exit":
            active.discard((name, pid))
        peak = max(peak, len(active))
    return peak


def test_a_queue_limit_holds_across_a_killed_worker(
    setup: tuple[ModuleType, str, Path], workers: Workers
) -> None:
    """Eight runs in a queue limited to 2, two workers; one is SIGKILLed mid-send and a
    third starts: every run succeeds and no more than 2 sends were ever in flight."""
    mod, _, ledger = setup
    handles = [mod.app.enqueue("mailer", i, queue="mail") for i in range(8)]
    a = workers.start("A")
    workers.start("B")
    _wait(lambda: sum(1 for c in _calls(ledger) if c[1] == "enter") >= 3, 60, "3 sends")
    os.kill(a.pid, signal.SIGKILL)
    a.wait(timeout=10)
    kill_id = max(c[0] for c in _calls(ledger))
    workers.start("C")
    _wait(lambda: all(h.status() == "succeeded" for h in handles), 120, "every run")
    assert sorted(h.result(timeout=1) for h in handles) == list(range(8))
    calls = _calls(ledger)
    assert _peak(calls, a.pid, kill_id) <= 2
    exits = sorted(name for _, kind, name, _ in calls if kind == "exit")
    assert sorted(set(exits)) == [f"send{i}" for i in range(8)]


@pytest.mark.parametrize("crash", ["after_journal:kid_work:exit", "before_step:after:exit"])
def test_a_killed_parent_never_starts_its_child_twice(
    setup: tuple[ModuleType, str, Path], workers: Workers, crash: str
) -> None:
    """The worker dies right after the child's step is journalled, or as the resumed
    parent goes on: after a restart there is one child run, its step ran once, and the
    parent gets its result."""
    mod, _, ledger = setup
    app = mod.app
    h = app.enqueue("parent", 4, run_id="p")
    first = workers.start("w1", crash=crash)
    first.wait(timeout=60)
    assert first.returncode == 137
    workers.start("w2")
    _wait(lambda: h.status() == "succeeded", 60, "the parent to succeed")
    assert h.result(timeout=1) == 13
    assert sorted(r.run_id for r in app.list_runs()) == ["p", "p:1"]
    kinds = [kind for _, kind, _, _ in _calls(ledger)]
    assert kinds.count("kid") == 1
    assert kinds.count("parent") == 1


@pytest.mark.parametrize(
    ("crash", "runs", "steps"),
    [
        ("before_step:1:exit", ["p"], []),  # nothing of the child committed: neither
        ("after_journal:1:exit", ["p", "p:1"], [("child:kid", "waiting")]),  # both at once
    ],
)
def test_a_parent_killed_around_its_childs_creation_starts_it_once(
    setup: tuple[ModuleType, str, Path],
    workers: Workers,
    crash: str,
    runs: list[str],
    steps: list[tuple[str, str]],
) -> None:
    """The worker dies just before or just after the commit that creates the child with
    the parent's step (one transaction, through the group-commit writer): the journal
    holds both or neither, and the parent resumed by another worker has one child, whose
    step ran once, and gets its result."""
    mod, _, ledger = setup
    app = mod.app
    h = app.enqueue("parent", 4, run_id="p")
    first = workers.start("w1", crash=crash)
    first.wait(timeout=60)
    assert first.returncode == 137
    assert sorted(r.run_id for r in app.list_runs()) == runs
    assert [(s.name, s.status) for s in app.show("p").steps] == steps
    workers.start("w2")
    _wait(lambda: h.status() == "succeeded", 60, "the parent to succeed")
    assert h.result(timeout=1) == 13
    assert sorted(r.run_id for r in app.list_runs()) == ["p", "p:1"]
    assert [e.action for e in app.show("p:1").audit].count("created") == 1
    kinds = [kind for _, kind, _, _ in _calls(ledger)]
    assert kinds.count("kid") == 1
    assert kinds.count("parent") == 1


@pytest.mark.parametrize(
    ("crash", "journalled"),
    [
        ("before_step:new_tax:exit", []),  # the marker is still in the writer: lost
        ("after_journal:new_tax:exit", ["patch:tax-fix", "new_tax"]),  # one commit: both
    ],
)
def test_a_killed_run_replays_the_branch_it_took(
    setup: tuple[ModuleType, str, Path], workers: Workers, crash: str, journalled: list[str]
) -> None:
    """The worker dies right after ``patched()`` took the new branch (before the branch's
    first step ran) or right after that step's commit; what the journal holds then is
    the marker and the step together or neither, and the run resumed by another worker
    takes the new branch again: the old branch never runs, the new step ran once."""
    mod, _, ledger = setup
    app = mod.app
    h = app.enqueue("order", 5, run_id="o")
    first = workers.start("w1", crash=crash)
    first.wait(timeout=60)
    assert first.returncode == 137
    assert [s.name for s in app.show("o").steps] == journalled
    workers.start("w2")
    _wait(lambda: h.status() == "succeeded", 60, "the run to succeed")
    assert h.result(timeout=1) == 70
    assert [s.name for s in app.show("o").steps] == ["patch:tax-fix", "new_tax", "receipt"]
    branches = [name for _, kind, name, _ in _calls(ledger) if kind == "branch"]
    assert branches == ["new"]
    assert [kind for _, kind, _, _ in _calls(ledger)].count("receipt") == 1
