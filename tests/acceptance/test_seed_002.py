"""Seed 002 (durable execution): every exercise's "Done when", asserted on the lab's facts."""

from __future__ import annotations

from typing import Any

from surefoot import lab


def run(exp_id: str, **kwargs: Any) -> lab.LabResult:
    """Run one experiment in quick mode with seed 0."""
    with lab.context(quick=True, seed=0, **kwargs) as ctx:
        result = lab.get(exp_id).run(ctx)
    assert result.tables and result.answer
    assert result.model == lab.FAKE_MODEL
    return result


def test_easy1_strategies() -> None:
    """Restart pays extra model calls and duplicates; journal_keys pays nothing extra, no dups."""
    f = run("durable.strategies").facts
    assert f["extra_model_calls"]["restart"] > 0
    assert f["extra_model_calls"]["journal"] == 0
    assert f["extra_model_calls"]["journal_keys"] == 0
    assert f["duplicates"]["journal_keys"] == 0
    assert f["duplicates"]["restart"] >= f["duplicates"]["journal"] >= 1
    cost = f["cost"]
    assert cost["restart"]["usd_per_run"] > cost["journal_keys"]["usd_per_run"]
    assert cost["journal_keys"]["model_calls_per_run"] == 3


def test_easy2_window() -> None:
    """A crash after publish duplicates the post without the key and never with it."""
    f = run("durable.window").facts
    assert f["journal"]["duplicates"] == 1
    assert f["journal_keys"] == {
        "publish_calls": 2,
        "posts": 1,
        "duplicates": 0,
        "publish_attempts": 2,
    }
    assert f["journal_keys_service_ignores_keys"]["duplicates"] == 1


def test_easy3_effects() -> None:
    """describe() lists the seven steps by kind; the one effect is compensated and keyed."""
    f = run("durable.effects").facts
    assert f["kinds"] == {
        "plan": "pure",
        "search": "pure",
        "read": "pure",
        "summarize": "pure",
        "draft": "pure",
        "approve": "wait",
        "publish": "effect",
    }
    assert f["compensations"] == {"publish": "unpublish"}
    assert f["effects_without_key_plan"] == []


def test_medium1_kill9() -> None:
    """A SIGKILLed worker's run completes after restart without recomputing journalled steps."""
    f = run("durable.kill9").facts
    keys = f["journal_keys"]
    assert keys["status"] == "succeeded"
    assert {"plan", "search"} <= set(keys["journalled_before_kill"])
    assert keys["calls_per_step"]["plan"] == 1 and keys["calls_per_step"]["search"] == 1
    assert keys["repeated_for_journalled_steps"] == 0
    assert keys["calls_per_step"]["publish"] == 1
    assert f["restart"]["status"] == "succeeded"
    assert f["restart"]["calls_per_step"]["plan"] == 2


def test_medium2_versions() -> None:
    """v1 runs finish on v1, new runs use v2; stranded and mismatched runs are visible."""
    f = run("durable.versions").facts
    assert f["versions"] == {"r-old": "1", "r-new": "2"}
    assert f["statuses"] == {"r-old": "succeeded", "r-new": "succeeded"}
    assert "fact_check" not in f["r_old_steps"] and "fact_check" in f["r_new_steps"]
    assert f["stranded"] is True and f["stranded_status"] == "sleeping"
    assert f["v2_worker_claimed"] == 0
    assert f["edited_status"] == "needs_attention"
    msg = f["mismatch"]["message"]
    assert f["mismatch"]["type"].endswith("StepMismatchError")
    assert "r-edited" in msg and "6" in msg and "signal:approve" in msg and "fact_check" in msg


def test_medium3_timers() -> None:
    """Sleeping runs hold no lease, coroutine or slot, and resume once the clock passes."""
    f = run("durable.timers").facts
    n = f["runs"]
    assert f["sleeping"] == n
    assert f["lease_held_while_sleeping"] == 0
    assert f["in_memory_while_sleeping"] == 0 and f["tasks_while_sleeping"] == 0
    assert f["claimed_before_deadline"] == 0
    assert f["claimed_after_deadline"] == n and f["succeeded"] == n


def test_hard1_chaos() -> None:
    """Under SIGKILL chaos journal_keys completes every run with no duplicate post."""
    f = run("durable.chaos").facts
    assert f["kills"] >= 1
    keys = f["journal_keys"]
    assert keys["completion_rate"] == 1.0
    assert keys["duplicates"] == 0
    assert keys["repeated_after_journal"] == 0
    assert f["journal"]["repeated_after_journal"] == 0
    assert f["restart"]["repeated_after_journal"] is None


def test_hard3_saga() -> None:
    """A failed compensation parks the run with an audit of what was undone; retry finishes."""
    f = run("durable.saga").facts
    assert f["status_before"] == "needs_attention"
    assert f["live_before"] == ["blog"]
    assert [u["pos"] for u in f["undone"]] == ["8"]
    assert [u["pos"] for u in f["not_undone"]] == ["7"]
    assert f["status_after"] == "failed" and f["live_after"] == []
    assert "retry" in f["audit_actions"]
