"""The policy simulator: what each policy keeps, retries and calls, counted inside the fakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from surefoot.clock import FakeClock
from surefoot.errors import ConfigError
from surefoot.llm import FakeLLM
from surefoot.statebus import Store
from surefoot_lab.statebus import shared
from surefoot_lab.statebus.real_agents import run_real_agents


def test_last_writer_wins_loses_findings_without_an_error() -> None:
    """Overlapping agents lose findings; no conflict is raised; the store counts each loss."""
    r = shared.run("last_writer_wins", agents=6, seed=0)
    assert r.produced == 18 and r.lost > 0 and r.kept + r.lost == 18
    assert r.conflicts == 0 and r.retries == 0
    assert r.lost_updates == r.lost
    assert r.model_calls == 18


def test_optimistic_keeps_everything_and_pays_in_model_calls() -> None:
    """Every conflict is one retry and one extra model call; nothing is lost."""
    llm = FakeLLM(seed=3)
    r = shared.run("optimistic", agents=6, seed=3, llm=llm)
    assert r.kept == r.produced == 18 and r.lost == 0
    assert r.retries == r.conflicts > 0
    assert r.model_calls == llm.calls == r.produced + r.retries
    assert r.lost_updates == 0


def test_locked_serialises_without_retries_or_extra_calls() -> None:
    """With leases longer than any model call, nothing is lost or redone; agents wait."""
    r = shared.run("locked", agents=4, seed=1)
    assert r.kept == r.produced and r.retries == 0 and r.model_calls == r.produced
    assert r.waits > 0


def test_locked_fencing_refuses_a_write_after_the_lease_expired() -> None:
    """Slow model calls outlive the lease; the late fenced write is refused and redone."""
    r = shared.run("locked", agents=3, seed=1, slow=0.3)
    assert r.conflicts > 0 and r.retries == r.conflicts
    assert r.kept == r.produced and r.lost == 0


def test_partitioned_has_no_conflicts_and_reports_the_merge() -> None:
    """Sections never conflict; the merge reads each section once and writes once."""
    r = shared.run("partitioned", agents=5, seed=2)
    assert r.conflicts == 0 and r.retries == 0 and r.kept == r.produced == 15
    assert r.merge is not None
    assert (r.merge.sections_read, r.merge.writes, r.merge.model_calls, r.merge.items) == (
        5,
        1,
        0,
        15,
    )
    agents_in_order = [f["agent"] for f in r.report]
    assert agents_in_order == sorted(agents_in_order)


def test_merge_with_model_costs_one_call() -> None:
    """A summarising merge makes exactly one more model call."""
    plain = shared.run("partitioned", agents=3, seed=0)
    summ = shared.run("partitioned", agents=3, seed=0, merge_with_model=True)
    assert summ.model_calls == plain.model_calls + 1
    assert summ.merge is not None and summ.merge.model_calls == 1


def test_same_seed_same_run() -> None:
    """Runs are deterministic per seed."""
    assert shared.run("optimistic", 4, 7).as_dict() == shared.run("optimistic", 4, 7).as_dict()


def test_backoff_spends_ticks_waiting() -> None:
    """With back-off, retries wait 1–4 ticks each (counted), and all findings are kept."""
    r = shared.run("optimistic", agents=6, seed=0, backoff=(1, 4))
    assert r.kept == r.produced
    assert r.retries <= r.backoff_ticks <= 4 * r.retries


def test_averaged_means_over_seeds() -> None:
    """averaged returns the mean of each count over the given seeds."""
    runs = [shared.run("last_writer_wins", 3, s) for s in (0, 1)]
    m = shared.averaged("last_writer_wins", agents=3, seeds=[0, 1])
    assert m["lost"] == sum(r.lost for r in runs) / 2 and m["seeds"] == 2.0


def test_partitioning_fails_for_a_cross_section_invariant() -> None:
    """Claims in per-agent sections double-book tasks; one versioned key never does."""
    part = shared.assign("partitioned", 4, 8, 0)
    opt = shared.assign("optimistic", 4, 8, 0)
    assert part["double_claimed"] > 0 and part["duplicate_work"] > 0
    assert opt["double_claimed"] == 0 and opt["claims"] == 8 and opt["retries"] > 0


@pytest.mark.parametrize(
    ("policy", "kw"),
    [("nope", {}), ("optimistic", {"agents": 0}), ("optimistic", {"think": (0, 2)})],
)
def test_bad_parameters_are_config_errors(policy: str, kw: dict[str, object]) -> None:
    """An unknown policy or bad sizes raise ConfigError."""
    with pytest.raises(ConfigError):
        shared.run(policy, **kw)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        shared.averaged("optimistic", seeds=[])


def test_locked_holds_no_database_transaction_during_a_model_call(tmp_path: Path) -> None:
    """During every model call of the locked policy, the SQLite connection is idle."""
    st = Store(f"sqlite:///{tmp_path / 'team.db'}", clock=FakeClock())
    db = st.storage.db
    open_during_call: list[bool] = []

    def responder(messages: list[dict[str, Any]]) -> str:
        open_during_call.append(db.conn().in_transaction)
        return "a finding"

    r = shared.run("locked", agents=3, seed=0, store=st, llm=FakeLLM(seed=0, responder=responder))
    assert r.kept == r.produced and len(open_during_call) == r.model_calls > 0
    assert not any(open_during_call)


def test_run_on_a_store_needs_a_fake_clock() -> None:
    """Leases are measured in ticks, so a Store on the system clock is refused."""
    with pytest.raises(ConfigError, match="FakeClock"):
        shared.run("locked", store=Store("memory://"))


def test_real_agents_refuse_a_process_local_store(tmp_path: Path) -> None:
    """memory:// cannot be shared by separate processes; the error says so."""
    with pytest.raises(ConfigError, match="one process"):
        run_real_agents("store", tmp_path, url="memory://")


def test_merged_appends_keep_everything_with_no_retry_and_no_conflict() -> None:
    """Store-applied appends: every finding kept, one model call each, no conflict, no retry."""
    r = shared.run("merged", agents=6, seed=0)
    assert r.kept == r.produced == 18 and r.lost == 0
    assert r.retries == r.conflicts == r.lost_updates == 0 and r.model_calls == 18
