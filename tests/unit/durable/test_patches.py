"""patched("id"): runs begun before a fix keep the old branch, new runs take the new one."""

from __future__ import annotations

from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, Worker
from surefoot.errors import ConfigError


def _old_and_new(app: App, *, patched: bool, ran: list[str]) -> Any:
    @app.step
    def old_tax(x: int) -> int:
        ran.append("old")
        return x + 1

    @app.step
    def new_tax(x: int) -> int:
        ran.append("new")
        return x + 2

    if not patched:

        @app.workflow
        def order(x: int) -> int:
            t = old_tax(x)
            app.sleep(60)
            return t

    else:

        @app.workflow
        def order(x: int) -> int:
            t = new_tax(x) if app.patched("tax-fix") else old_tax(x)
            app.sleep(60)
            return t

    return order


def test_old_runs_keep_the_old_branch_new_runs_take_the_new(db_url: str, clock: FakeClock) -> None:
    """A run that journalled old_tax before the deploy replays it; a run started after
    the deploy journals the patch marker and runs new_tax."""
    ran: list[str] = []
    before = App(db_url, clock=clock, poll=0.01)
    _old_and_new(before, patched=False, ran=ran)
    before.enqueue("order", 10, run_id="old")
    Worker(before).run_once(timeout=10)
    before.close()
    assert ran == ["old"]

    after = App(db_url, clock=clock, poll=0.01)
    _old_and_new(after, patched=True, ran=ran)
    try:
        after.enqueue("order", 10, run_id="new")
        w = Worker(after)
        w.run_once(timeout=10)  # the new run reaches its sleep
        clock.advance(61)
        for _ in range(2):
            w.run_once(timeout=10)
        assert after.handle("old").result(timeout=5) == 11
        assert after.handle("new").result(timeout=5) == 12
        assert sorted(ran) == ["new", "old"]  # the old run did not run anything again
        names = [s.name for s in after.show("new").steps]
        assert names[0] == "patch:tax-fix"
        assert "patch:tax-fix" not in [s.name for s in after.show("old").steps]
    finally:
        after.close()


def test_a_patch_marker_replays_as_the_new_branch(app: App, clock: FakeClock) -> None:
    """A run that took the new branch takes it again on replay (after a sleep)."""
    ran: list[str] = []
    _old_and_new(app, patched=True, ran=ran)
    h = app.enqueue("order", 1, run_id="r")
    w = Worker(app)
    w.run_once(timeout=10)
    clock.advance(61)
    w.run_once(timeout=10)
    assert h.result(timeout=5) == 3
    assert ran == ["new"]


def test_patched_outside_a_run_or_without_an_id_is_refused(app: App) -> None:
    """patched() needs a run and a non-empty id."""
    with pytest.raises(ConfigError, match="inside a workflow run"):
        app.patched("x")
    with pytest.raises(ConfigError, match="patch id"):
        app.patched("")


def test_runs_of_a_removed_version_are_listed_as_stranded(
    db_url: str, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pending run of version 1 while only version 2 is served: `app.stranded()` and
    `surefoot runs stranded` list it with what to do."""
    import json
    import threading

    from surefoot.cli import main

    old = App(db_url, clock=clock, poll=0.01)

    @old.workflow(name="flow", version="1")
    def flow_v1() -> int:
        return 1

    old.enqueue("flow", run_id="r1")
    old.close()
    new = App(db_url, clock=clock, poll=0.01, worker_id="v2")

    @new.workflow(name="flow", version="2")
    def flow_v2() -> int:
        return 2

    stop = threading.Event()
    t = threading.Thread(target=Worker(new).run, args=(stop,), daemon=True)
    t.start()
    try:
        for _ in range(200):
            if new.journal.live_workflows(since=clock.now()):
                break
            threading.Event().wait(0.01)
        (row,) = new.stranded()
        assert (row["run_id"], row["version"], row["status"]) == ("r1", "1", "pending")
        assert "version '1'" in row["todo"]
        if db_url.startswith("sqlite"):
            main(["runs", "stranded", "--db", db_url, "--json"])
            assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == ["r1"]
    finally:
        stop.set()
        t.join(timeout=10)
        new.close()
