"""The conformance suite's helpers: one engine's apps and outcomes, and polling."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from surefoot import durable


class Harness:
    """One test's engine: makes apps on it (one per "process"), and reads outcomes."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self.apps: list[durable.App] = []

    def app(self) -> durable.App:
        """A new app on this test's engine (a restarted worker is a new app)."""
        a = durable.App(self.url, poll=0.01)
        self.apps.append(a)
        return a

    def audit(self, app: durable.App, handle: durable.RunHandle) -> list[tuple[str, Any]]:
        """The run's saga audit: (action, detail) of compensated / failed / needs_attention."""
        kinds = ("compensated", "compensation_failed", "failed", "needs_attention")
        if self.name == "temporal":
            return [(a, d) for a, d in handle.audit() if a in kinds]  # type: ignore[attr-defined]
        return [(e.action, e.detail) for e in app.show(handle.run_id).audit if e.action in kinds]

    def close(self) -> None:
        for a in self.apps:
            a.close()


def until(pred: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait (polling) until ``pred()``; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)
