"""A schedule served by real worker processes starts its live tick exactly once.

Cron ticks are whole minutes, so the app's clock is the system clock shifted (the same
offset in every process) to put the next tick a few seconds after the workers start;
time then passes for real, and the workers poll at the default 0.2 s.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from surefoot.clock import SystemClock
from surefoot.durable import App

APP = """
import os
import time

from surefoot.clock import SystemClock
from surefoot.durable import App

OFFSET = float(os.environ["SCHEDULE_TEST_OFFSET"])


class ShiftedClock(SystemClock):
    __slots__ = ()

    def now(self) -> float:
        return time.time() + OFFSET


app = App(os.environ["SCHEDULE_TEST_DB"], clock=ShiftedClock())


@app.workflow
def ping() -> str:
    return "pong"


app.schedule("minutely", ping, cron="* * * * *", catchup="skip")
"""

LEAD = 8.0  # seconds from now to the tick: the workers start (imports included) before it


class _Shifted(SystemClock):
    """The workers' clock, in this process."""

    __slots__ = ("offset",)

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset


def test_two_worker_processes_start_the_live_tick_once_with_skip(tmp_path: Path) -> None:
    (tmp_path / "sched_app.py").write_text(textwrap.dedent(APP))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    now = time.time()
    tick = math.ceil((now + LEAD) / 60) * 60 + 60  # a minute boundary, in shifted time
    offset = tick - (now + LEAD)  # shifted now = tick - LEAD
    env = {
        **os.environ,
        "SCHEDULE_TEST_OFFSET": repr(offset),
        "SCHEDULE_TEST_DB": url,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [sys.executable, "-m", "surefoot", "worker", "--db", url, "--app", "sched_app:app"]
    with App(url, clock=_Shifted(offset)) as maker:  # the journal, and the schedule's record

        @maker.workflow
        def ping() -> str:
            return "pong"

        maker.schedule("minutely", ping, cron="* * * * *", catchup="skip")
        assert maker.fire_schedules() == []  # records it: next tick due at `tick`
    procs = [subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE) for _ in range(2)]
    want = "minutely@" + dt.datetime.fromtimestamp(tick, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        deadline = time.monotonic() + LEAD + 20
        ids: list[str] = []
        while time.monotonic() < deadline:
            with App(url) as reader:
                ids = [r.run_id for r in reader.list_runs()]
            if ids:
                break
            time.sleep(0.2)
        time.sleep(1.0)  # a second run of the same tick would show by now
        with App(url) as reader:
            runs = reader.list_runs()
        assert [p.poll() for p in procs] == [None, None]  # both still serving
        assert [r.run_id for r in runs] == [want]
        with App(url) as reader:
            assert reader.handle(want).result(timeout=10) == "pong"
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=20)
            assert p.stderr is not None
            p.stderr.close()
