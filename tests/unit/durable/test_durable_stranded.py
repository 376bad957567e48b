"""``stranded`` is computed from what workers advertise in the journal only: the same from
every process, whatever the viewer registers and whatever its own lease."""

from __future__ import annotations

from surefoot import FakeClock
from surefoot.durable import App


def _register(app: App) -> None:
    @app.workflow(name="w", version="1")
    async def w() -> str:
        await app.sleep(10)
        return "done"


def _serve_once(app: App) -> None:
    """One heartbeat of a serving worker: what it advertises in the journal."""
    app.serving = True
    try:
        app.executor.announce()
    finally:
        app.serving = False


def test_a_viewer_that_registers_the_version_still_sees_it_stranded(
    db_url: str, clock: FakeClock
) -> None:
    """No worker serves the run's version: stranded, even though the viewer registers it."""
    with App(db_url, clock=clock, poll=0.01) as viewer:
        _register(viewer)
        viewer.enqueue("w", run_id="r")
        d = viewer.show("r")
        assert d.registered and d.run.status == "pending"
        assert d.stranded


def test_liveness_is_the_workers_own_lease_not_the_viewers(db_url: str, clock: FakeClock) -> None:
    """A worker with a long lease stays live for a viewer with a short one, and a worker
    with a short lease reads as gone to a viewer with a long one."""
    with App(db_url, clock=clock, poll=0.01, lease=60, worker_id="slow") as worker:
        _register(worker)
        worker.enqueue("w", run_id="r")
        _serve_once(worker)
    clock.advance(20)  # 20 s after its heartbeat: live for 3 x 60 s
    with App(db_url, clock=clock, poll=0.01, lease=1) as viewer:
        assert not viewer.show("r").stranded
    clock.advance(200)  # 220 s: past 3 x 60 s
    with App(db_url, clock=clock, poll=0.01, lease=1) as viewer:
        assert viewer.show("r").stranded
    with App(db_url, clock=clock, poll=0.01, lease=1, worker_id="quick") as worker:
        _register(worker)
        _serve_once(worker)
    clock.advance(10)  # 10 s after a heartbeat of a worker whose lease is 1 s
    with App(db_url, clock=clock, poll=0.01, lease=60) as viewer:
        assert viewer.show("r").stranded


def test_a_worker_that_stopped_no_longer_counts_as_live(db_url: str, clock: FakeClock) -> None:
    """While a worker serves, its version's runs are not stranded; once it has stopped
    they are, without waiting for its advertisement to run out."""
    from surefoot.durable import Worker

    with App(db_url, clock=clock, poll=0.01, lease=60, worker_id="w1") as worker:
        _register(worker)
        worker.enqueue("w", run_id="r")
        _serve_once(worker)
        assert not worker.show("r").stranded
        worker.enqueue("w", run_id="r2")
        Worker(worker).run(idle_exit=0.3)
        assert worker.show("r").run.status == "sleeping"
        assert worker.show("r").stranded
