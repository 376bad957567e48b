"""The chaos harness's first kill: a short run still sees a worker SIGKILLed mid-run."""

from __future__ import annotations

from pathlib import Path

import pytest

from surefoot_lab.agent.chaos import ChaosConfig, run_chaos

pytestmark = pytest.mark.crash


def test_first_kill_hits_a_worker_in_flight_before_any_scheduled_kill(tmp_path: Path) -> None:
    """With kill_in_flight_first the harness kills the worker holding a run as soon as it
    holds one, although kill_every would not fire for 1000 s; every run still completes."""
    cfg = ChaosConfig(
        db=f"sqlite:///{tmp_path / 'chaos.db'}",
        ledger=str(tmp_path / "ledger.db"),
        runs=4,
        strategies=("journal_keys",),
        workers=1,
        concurrency=4,
        seed=3,
        kill_every=(1000.0, 1000.0),
        max_kills=1,
        kill_in_flight_first=True,
        time_limit=60.0,
        lease=2.0,
        latency=0.03,
        reply_latency=0.03,
    )
    rep = run_chaos(cfg)
    assert rep.kills == 1 and rep.restarts == 1 and not rep.timed_out
    (r,) = rep.results
    assert r.completed == r.runs == 4
    assert r.duplicate_effects == 0 and r.repeated_after_journal == 0
