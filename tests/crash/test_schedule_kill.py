"""Schedules under SIGKILL: workers killed as ticks fall due, restarted after downtime;
every tick between the first and the last has exactly one run, and each ran.

The workers read a scaled clock (``durable_schedule_app.py``): a one-minute cron tick
passes every ``60 / SPEED`` real seconds, and every process agrees on which tick is due.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import random
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
SPEED = 30.0  # a tick every 2 real seconds
TICK = 60.0 / SPEED
NAME = "every-minute"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "durable_schedule_app", HERE / "durable_schedule_app.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["durable_schedule_app"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(params=["sqlite", "postgresql"])
def setup(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ModuleType, str, Path]]:
    """The app on a fresh journal, a ledger file, and the scaled clock's origin."""
    ledger = tmp_path / "ledger.db"
    monkeypatch.setenv("SUREFOOT_LEDGER", str(ledger))
    monkeypatch.setenv("SUREFOOT_T0", repr(time.time()))
    monkeypatch.setenv("SUREFOOT_SPEED", repr(SPEED))
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        url = f"{request.getfixturevalue('pg_url')}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    mod = _load()
    mod.app.configure(url=url)
    mod.app.journal  # noqa: B018 - made before the workers start (reading makes none)
    yield mod, url, ledger
    mod.app.close()
    if request.param == "postgresql":
        st: Any = storage.open(url)
        st.db.drop_schema()
        st.close()


class Workers:
    """Worker processes this test started; each is stopped by its pid at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, worker_id: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(SRC)])}
        env.pop("SUREFOOT_CRASH", None)
        cmd = [sys.executable, "-m", "surefoot", "worker", "--db", self.url, "--app"]
        # A lease of 90 clock seconds is 3 real ones (heartbeats come every real 30 s: a
        # tick's run takes milliseconds, so only a killed worker's run outlives its lease).
        cmd += ["durable_schedule_app:app", "--lease", "90", "--poll", "0.02"]
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


def _ledger(path: Path) -> list[tuple[str, int]]:
    if not path.exists():
        return []
    with sqlite3.connect(path, timeout=30) as c:
        try:
            return list(c.execute("SELECT name, pid FROM calls WHERE kind = 'tick' ORDER BY id"))
        except sqlite3.OperationalError:
            return []


def _wait(pred: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _kill_as_a_tick_falls_due(mod: ModuleType, p: subprocess.Popen[bytes], rng: Any) -> None:
    """SIGKILL ``p`` between 0 and 60 ms (real) after the next tick's time: while it is
    due, being fired, or its run executing."""
    now = mod.app.clock.now()
    nxt = (now // 60 + 1) * 60
    time.sleep((nxt - now) / SPEED + rng.uniform(0.0, 0.06))
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)


def test_each_tick_starts_exactly_one_run_across_kills_and_restarts(
    setup: tuple[ModuleType, str, Path],
) -> None:
    """Two workers fire a one-minute schedule (catch-up ``all``); one is SIGKILLed as a
    tick falls due, then the other, both down for two ticks, then two new workers start
    and one of them is killed as a tick falls due too. Every tick from the first to the
    last has exactly one run, all succeed (the missed ones caught up), each tick's step
    ran (at most once more per kill), and runs were fired from more than one process."""
    mod, url, ledger = setup
    app = mod.app
    rng = random.Random(2026)
    workers = Workers(url)

    def ticks() -> list[Any]:
        return [r for r in app.list_runs(limit=1000) if r.run_id.startswith(f"{NAME}@")]

    def done(n: int) -> Callable[[], bool]:
        return lambda: sum(1 for r in ticks() if r.status == "succeeded") >= n

    try:
        a, b = workers.start("A"), workers.start("B")
        _wait(done(2), 30 * TICK, "two ticks")
        _kill_as_a_tick_falls_due(mod, a, rng)
        _wait(done(len(ticks()) + 1), 10 * TICK, "a tick fired by the survivor")
        _kill_as_a_tick_falls_due(mod, b, rng)
        down_at = app.clock.now()
        time.sleep(2 * TICK + 0.2)  # no worker: two ticks pass unfired
        c, _d = workers.start("C"), workers.start("D")
        missed = (app.clock.now() // 60) - (down_at // 60)
        _wait(done(len(ticks()) + int(missed)), 30 * TICK, "the missed ticks caught up")
        _kill_as_a_tick_falls_due(mod, c, rng)
        seen = len(ticks())
        _wait(done(seen + 1), 10 * TICK, "a tick after the last kill")
        _wait(lambda: all(r.status == "succeeded" for r in ticks()), 10 * TICK, "every run")
    finally:
        workers.close()
    runs = ticks()
    ids = sorted(r.run_id for r in runs)
    first, last = _tick_of(ids[0]), _tick_of(ids[-1])
    expected = [_tick_id(first + 60 * i) for i in range(round((last - first) / 60) + 1)]
    assert ids == expected  # no tick missed, none twice
    assert len(ids) >= 7
    assert all(r.status == "succeeded" for r in runs)
    calls = _ledger(ledger)
    ran = [name for name, _ in calls]
    assert set(ran) == set(ids)  # every tick's step ran
    assert len(ran) <= len(ids) + 3  # again only where a worker was killed mid-run
    assert len({pid for _, pid in calls}) >= 2
    assert {r.result for r in runs} == set(ids)


_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # a tick's run id is <schedule>@<tick> (docs/durable.md)


def _tick_of(run_id: str) -> float:
    at = dt.datetime.strptime(run_id.split("@", 1)[1], _FORMAT)
    return at.replace(tzinfo=dt.UTC).timestamp()


def _tick_id(tick: float) -> str:
    return f"{NAME}@{dt.datetime.fromtimestamp(tick, dt.UTC).strftime(_FORMAT)}"
