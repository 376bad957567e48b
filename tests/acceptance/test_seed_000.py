"""Seed 000 (shared state and messages): each exercise's "Done when", from the lab, quick mode."""

from __future__ import annotations

from typing import Any

import pytest

import surefoot_lab as lab


def _run(exp_id: str, **kw: Any) -> lab.LabResult:
    with lab.context(quick=True, **kw) as ctx:
        return lab.get(exp_id).run(ctx)


def test_easy1_policies_report_kept_retries_and_calls() -> None:
    """LWW loses findings with no error; optimistic and locked keep all; calls add up."""
    res = _run("statebus.policies")
    f = res.facts
    lww, opt, lock = f["last_writer_wins"], f["optimistic"], f["locked"]
    assert lww["lost"] > 0 and lww["conflicts"] == 0 and lww["retries"] == 0
    assert lww["lost_updates"] == lww["lost"]  # the store's count is the measured loss
    merged = f["merged"]  # store-applied appends: nothing lost, nothing retried
    assert merged["lost"] == 0 and merged["retries"] == 0 and merged["model_calls"] == 12
    assert "merged (each finding sent as a contribution" in res.answer
    assert opt["lost"] == 0 and opt["retries"] > 0
    assert opt["model_calls"] == pytest.approx(12 + opt["retries"])
    assert lock["lost"] == 0 and lock["retries"] == 0 and lock["model_calls"] == 12
    assert f["deliver_idempotent"]["repeated"] == 0 < f["deliver_at_least_once"]["repeated"]
    # the answer reads its claims from the facts
    assert "Last-writer-wins raises no error" in res.answer and lww["conflicts"] == 0
    assert "optimistic keeps all" in res.answer and "locked keeps all" in res.answer
    assert f"{lww['kept']:.1f} of 12 findings" in res.answer
    assert res.model == lab.FAKE_MODEL and "date" in res.params


def test_easy2_lost_update_replayed_on_store() -> None:
    """Two agents, one report: a0's finding is lost, counted once; expect= keeps both."""
    res = _run("statebus.lost-update")
    f = res.facts
    assert res.model == lab.NO_MODEL  # a Store only: no model call
    assert "a0's work was lost, and no error was raised" in res.answer
    assert "raised ConflictError" in res.answer and "keeps 2 findings" in res.answer
    assert f["final_report"] == ["a1: p99 latency is in the ORM"]
    assert f["lost_agent"] == "a0" and f["lost_updates"] == 1
    assert f["lost_record"] == [("report", 2, "a1", 1, 1)]
    assert len(f["final_versioned"]) == 2 and "version 2" in f["conflict"]


def test_easy3_duplicates_same_traffic() -> None:
    """at_least_once repeats effects, idempotent does not, with the same sends and acks."""
    res = _run("statebus.duplicates")
    f = res.facts
    assert res.model == lab.NO_MODEL and "The traffic is the same" in res.answer
    assert f["sent"]["at_least_once"] == f["sent"]["idempotent"]
    assert f["acks"]["at_least_once"] == f["acks"]["idempotent"]
    assert f["repeated"]["at_least_once"] > 0 and f["repeated"]["idempotent"] == 0
    assert f["missing"]["at_least_once"] == f["missing"]["idempotent"]


def test_medium1_backoff_trades_retries_for_ticks() -> None:
    """Back-off of 1–4 ticks lowers retries and raises ticks for 6 and 12 agents."""
    f = _run("statebus.backoff").facts
    for n in (6, 12):
        none, back = f[f"{n}_none"], f[f"{n}_backoff"]
        assert back["retries"] < none["retries"] and back["ticks"] > none["ticks"]
        assert none["lost"] == back["lost"] == 0
    assert f["12_none"]["retries"] > f["6_none"]["retries"]


def test_medium2_partition_zero_conflicts_merge_cost_and_failure_case() -> None:
    """Sections: no conflicts, a merge of 1 write; a cross-section invariant breaks."""
    res = _run("statebus.partition")
    f = res.facts
    assert f["partitioned"]["conflicts"] == 0 and f["partitioned"]["lost"] == 0
    assert f["merge"] == {"sections_read": 6, "writes": 1, "model_calls": 0, "ticks": 1}
    assert f["merge_with_model_calls"] == 1 and "1 when the merge summarises" in res.answer
    assert "every finding is kept" in res.answer and res.model == lab.FAKE_MODEL
    assert f["assign_partitioned"]["double_claimed"] > 0
    assert f["assign_optimistic"]["double_claimed"] == 0


def test_medium3_dead_letters_at_40_percent_loss_and_redrive() -> None:
    """Dead letters appear at 40% loss; redrive to an idempotent receiver leaves none missing."""
    res = _run("statebus.dead-letters")
    f = res.facts
    assert res.model == lab.NO_MODEL
    assert f["stream_dead_reasons"] == ["max_attempts"] and f["stream_dead_attempts"] == [3]
    assert "(reason max_attempts, 3 deliveries each)" in res.answer
    assert "all 100 of 100 tasks were handled" in res.answer
    assert f["mean_dead_letters"] > 0 and f["mean_missing"] > 0
    assert f["missing_after_redrive"] == 0 and f["repeated_after_redrive"] == 0
    assert f["example"]["reason"] == "max_attempts" and len(f["example"]["history"]) == 5
    assert f["stream_dead"] > 0 and f["stream_redriven"] == f["stream_dead"]
    assert f["stream_handled"] == 100 and f["stream_dead_after"] == 0


def test_hard1_real_agent_processes() -> None:
    """Real processes lose entries on a plain JSON file and none with a version check."""
    res = _run("statebus.real-agents")
    f = res.facts
    assert f["json"]["lost"] > 0 and f["json"]["retries"] == 0
    assert f["json"]["model_calls"] == f["json"]["produced"] == 12
    for mode in ("store", "stream"):
        assert f[mode]["lost"] == 0 and f[mode]["kept"] == 12
        assert f[mode]["model_calls"] == 12 + f[mode]["retries"]
    assert f["stream"]["dedup_hits"] == 3
    assert f["sim_last_writer_wins"]["lost"] > 0
    assert res.model == lab.FAKE_MODEL and "date" in res.params
