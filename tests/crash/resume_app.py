"""The app of the resume crash tests: a workflow of two steps started in-process (``start``)
by a child process that the test SIGKILLs inside step ``hang``; each step call is appended
to ``SUREFOOT_CALLS`` (one line per call, flushed before the step goes on)."""

from __future__ import annotations

import os
import time

from surefoot import durable

app = durable.App("sqlite://", lease=60.0, poll=0.05)


def called(name: str) -> None:
    with open(os.environ["SUREFOOT_CALLS"], "a") as f:
        f.write(f"{name} {os.getpid()}\n")


@app.step
def first() -> int:
    called("first")
    return 1


@app.step
def hang(x: int) -> int:
    called("hang")
    if os.environ.get("SUREFOOT_HANG") == "1":
        time.sleep(600)  # the test kills this process here
    return x + 1


@app.workflow
def two() -> int:
    return hang(first())


def main(url: str, run_id: str, worker_id: str) -> None:
    """Start ``run_id`` here, in-process (the test SIGKILLs this process inside ``hang``)."""
    app.configure(url=url, worker_id=worker_id)
    app.start(two, run_id=run_id).result()
