"""What ``App.start`` reads: a run it has just created is executed from the row it wrote,
with no steps to look up; a run that exists already is read, with its steps (replay)."""

from __future__ import annotations

from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App


def _counting(app: App, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the journal's run and steps reads from here on."""
    journal: Any = app.journal
    calls = {"get_run": 0, "steps": 0}
    for name in calls:
        real = getattr(journal, name)

        def counted(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(journal, name, counted)
    return calls


def test_a_new_run_is_read_before_it_is_created_and_for_its_result_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two reads of the run (is the id taken? what did it return?) and none of its steps."""
    app = App("sqlite://", clock=FakeClock())

    @app.step
    async def add(x: int) -> int:
        return x + 1

    @app.workflow
    async def flow(n: int) -> int:
        return await add(n)

    assert app.start(flow, 1, run_id="warm").result(timeout=10) == 2
    calls = _counting(app, monkeypatch)
    assert app.start(flow, 41, run_id="r").result(timeout=10) == 42
    assert calls == {"get_run": 2, "steps": 0}
    assert [s.result for s in app.show("r").steps] == [42]
    app.close()


def test_an_abandoned_run_started_again_is_read_with_its_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run that exists is resumed from its journal: its row and steps are read, and its
    journalled step is replayed, not run again."""
    app = App("sqlite://", clock=FakeClock())
    ran: list[int] = []

    @app.step
    async def add(x: int) -> int:
        ran.append(x)
        return x + 1

    @app.workflow
    async def flow(n: int) -> int:
        return await add(n)

    assert app.start(flow, 1, run_id="r").result(timeout=10) == 2
    assert app.journal.operator(  # type: ignore[attr-defined]
        "r", status="pending", from_statuses=["succeeded"], now=1.0, actor="test",
        action="retried", detail="{}",
    ) is not None  # fmt: skip
    calls = _counting(app, monkeypatch)
    assert app.start(flow, 1, run_id="r").result(timeout=10) == 2
    assert ran == [1]  # replayed from the journal
    assert calls["steps"] == 1 and calls["get_run"] >= 2
    app.close()
