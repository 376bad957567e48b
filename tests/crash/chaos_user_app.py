"""A team's own app for `surefoot chaos` (tests/crash/test_user_chaos.py): three steps a run,
each long enough that a SIGKILL lands inside one. ``FLAKY=1`` makes the last step fail."""

from __future__ import annotations

import os
import time

from surefoot import durable

app = durable.App()


@app.step
def fetch(n: int) -> int:
    time.sleep(0.15)
    return n * 2


@app.step
def think(x: int) -> int:
    time.sleep(0.15)
    return x + 1


@app.step
def publish(x: int) -> str:
    time.sleep(0.1)
    if os.environ.get("CHAOS_APP_FLAKY") == "1":
        raise ValueError("the last step fails on purpose")
    return f"posted {x}"


@app.workflow
def triage(n: int) -> str:
    return publish(think(fetch(n)))
