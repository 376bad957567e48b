"""``patched()`` in an async workflow: the marker shares the next record's commit (no commit
of its own on the event loop); in a sync workflow it commits at once, in its thread."""

from __future__ import annotations

from typing import Any

from surefoot.durable import App


def _batches(app: App) -> list[list[str]]:
    """Record the names of every batch the journal commits."""
    seen: list[list[str]] = []
    journal: Any = app.journal
    real = journal.commit

    def commit(records: list[Any]) -> list[bool]:
        seen.append([getattr(r, "name", None) or f"run:{r.status}" for r in records])
        return real(records)  # type: ignore[no-any-return]

    journal.commit = commit
    return seen


def test_an_async_workflows_marker_goes_with_the_next_steps_row(app: App) -> None:
    """One commit holds the marker and the new branch's step, in that order."""
    batches = _batches(app)

    @app.step
    async def new_tax(x: int) -> int:
        return x + 2

    @app.workflow
    async def order(x: int) -> int:
        return await new_tax(x) if app.patched("tax") else x

    assert app.start(order, 1, run_id="o").result(timeout=10) == 3
    with_marker = [b for b in batches if "patch:tax" in b]
    assert with_marker == [["patch:tax", "new_tax"]]
    assert [s.name for s in app.show("o").steps] == ["patch:tax", "new_tax"]


def test_an_async_workflows_marker_with_nothing_after_it_is_still_journalled(
    app: App,
) -> None:
    """A marker followed by the run's end alone is committed (with the end or before)."""

    @app.workflow
    async def flag() -> bool:
        return app.patched("flag")

    assert app.start(flag, run_id="f").result(timeout=10) is True
    assert [s.name for s in app.show("f").steps] == ["patch:flag"]


def test_a_sync_workflows_marker_commits_at_once(app: App) -> None:
    """In a sync workflow (its own thread) the marker is its own commit, before the step."""
    batches = _batches(app)

    @app.step
    def new_tax(x: int) -> int:
        return x + 2

    @app.workflow
    def order(x: int) -> int:
        return new_tax(x) if app.patched("tax") else x

    assert app.start(order, 1, run_id="s").result(timeout=10) == 3
    names = [n for b in batches for n in b]
    assert names.index("patch:tax") < names.index("new_tax")
    assert ["patch:tax"] in batches
