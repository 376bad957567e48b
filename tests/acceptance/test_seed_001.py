"""Seed 001 (resilient calls): every exercise's "Done when", asserted on the lab's facts."""

from __future__ import annotations

from typing import Any

import pytest

import surefoot_lab as lab

# the experiments whose fakes include the FakeLLM; every other one makes no model call
_CALLS_MODEL = {"resilience.llm-retry", "resilience.crash-resume"}


def run(exp_id: str, **kwargs: Any) -> lab.LabResult:
    """Run one experiment in quick mode with seed 0."""
    with lab.context(quick=True, seed=0, **kwargs) as ctx:
        result = lab.get(exp_id).run(ctx)
    assert result.tables and result.answer
    assert result.model == (lab.FAKE_MODEL if exp_id in _CALLS_MODEL else lab.NO_MODEL)
    return result


def test_easy1_classify() -> None:
    """The six cases of the seed each get retry-or-not and a reason from is_retryable."""
    res = run("resilience.classify")
    f = res.facts
    r = f["retry"]
    assert r["500"] and r["connection reset"] and r["429 with Retry-After: 10"]
    assert not r["401"] and not r["422"] and not r["404 from a tool endpoint just deployed"]
    assert f["after"]["429 with Retry-After: 10"] == 10.0
    assert not r["429 insufficient_quota"] and not r["503 with x-should-retry: false"]
    assert r["529 overloaded"] and not r["ValueError (a bug)"]
    # the answer's verdicts are the facts' verdicts
    retry_part, no_part = res.answer.split("Do not retry:", 1)
    for case in ("500", "401", "connection reset", "422"):
        assert (case in retry_part) == r[case] and (case in no_part.split(".")[0]) != r[case]


def test_classify_answer_states_the_404_verdict_it_measured() -> None:
    """The 404 sentence of resilience.classify follows the classifier's verdict in the facts."""
    res = run("resilience.classify")
    permanent = not res.facts["retry"]["404 from a tool endpoint just deployed"]
    said = "treats the 404 from a just-deployed tool endpoint as permanent" in res.answer
    assert said == permanent
    assert "stays permanent" not in res.answer  # the old fixed claim


def test_easy2_waits() -> None:
    """The six waits are 0.5, 1, 2, 4, 8, 8 and total 23.5 s."""
    f = run("resilience.waits").facts
    assert f["waits"] == [0.5, 1, 2, 4, 8, 8] and f["total"] == 23.5
    m = f["jitter_mean_totals"]
    assert m["none"] == 23.5 and m["full"] < m["equal"] < 23.5


def test_easy3_odds() -> None:
    """About 26% and about 0.01%, computed and confirmed by the seeded simulation."""
    res = run("resilience.odds")
    f = res.facts
    assert f["simulation_agrees"] and "which agree with the formulas" in res.answer
    assert f"{f['library_failed_runs']} of {f['library_runs']:,} runs failed" in res.answer
    assert f["exact_one_attempt"] == pytest.approx(0.2614, abs=1e-4)
    assert f["exact_three_attempts"] == pytest.approx(1.2e-4, rel=1e-3)
    assert abs(f["simulated_one_attempt"] - f["exact_one_attempt"]) < 0.005
    # 200,000 runs: the expected 24 failures give a wide but bounded band
    assert 0.4e-4 < f["simulated_three_attempts"] < 2.5e-4
    assert f["library_failed_runs"] <= 3


def test_medium1_llm_retry() -> None:
    """Success rate rises with max_attempts 1, 2, 4 and mean attempts are counted in the fake."""
    f = run("resilience.llm-retry").facts
    rates = [f[k]["success_rate"] for k in ("1", "2", "4")]
    assert rates[0] < rates[1] < rates[2]
    for k in ("1", "2", "4"):
        assert abs(f[k]["success_rate"] - f[k]["expected"]) < 0.05
    assert f["1"]["mean_attempts"] == 1.0
    assert 1.0 < f["2"]["mean_attempts"] < f["4"]["mean_attempts"] < 1.6


def test_medium2_timeouts() -> None:
    """Slow-then-fast succeeds on attempt 2; no run passes its deadline."""
    res = run("resilience.timeouts")
    f = res.facts
    assert f["slow_then_fast_attempts"] == 2 and f["slow_then_fast_result"] == "ok"
    assert f["first_error"] == "TimeoutError_" and f["first_error_at"] == 1.0
    assert f["runs_past_deadline"] == 0 and f["worst_ratio"] <= 1.0 + 1e-6
    # every trial ended in a success or an expected give-up, counted by type
    assert sum(f["outcomes"].values()) == f["trials"]
    assert f["outcomes"]["ok"] > 0 and f["outcomes"]["TimeoutError_"] > 0
    assert f["slow_calls"] > 0  # counted by the fake's injector as requests arrived
    assert "no run passed its deadline" in res.answer and "at 1 s" in res.answer


def test_medium3_idempotency_sqlite_restart() -> None:
    """A second process on the same file returns the saved result without running the action."""
    res = run("resilience.idempotency-sqlite")
    f = res.facts
    assert "ran 1 time(s), in the first process" in res.answer
    assert "in 2 of 2 processes" in res.answer
    assert f["effects"] == 1 and f["effect_pid"] == f["first_pid"]
    assert f["runs"] == [1, 0] and f["replays"] == [0, 1]
    assert f["same_result"] and f["different_pids"]
    assert f["conflicts"] == [True, True]


def test_hard1_resilient_client() -> None:
    """The breaker clearly reduces primary calls and latency; every request succeeds."""
    res = run("resilience.resilient-client")
    f = res.facts
    w, wo = f["with_breaker"], f["without_breaker"]
    assert w["succeeded"] == wo["succeeded"] == 300  # replies counted in the two fakes
    assert 0 < w["backup"] <= w["backup_calls"] and 0 < wo["backup"] <= wo["backup_calls"]
    assert res.answer.startswith("Both rows serve all 300 requests")
    assert f"{wo['primary_calls']} without it, {w['primary_calls']} with it" in res.answer
    assert w["primary_calls"] < 0.6 * wo["primary_calls"]
    assert w["outage_latency"] < 0.5 * wo["outage_latency"]
    assert w["mean_latency"] < wo["mean_latency"]


def test_hard2_payments() -> None:
    """The keyless client double-charges; the keyed client never does (0 asserted)."""
    res = run("resilience.payments")
    f = res.facts
    assert res.answer.startswith("Without keys every lost reply became a second charge")
    assert "the service replayed the saved charge" in res.answer
    assert f["keyed"]["double_charges"] == 0
    assert f["keyed"]["charges"] == 100
    assert f["keyless"]["double_charges"] == 100
    assert f["keyed"]["lost_replies"] == f["keyless"]["lost_replies"] == 100


def test_hard3_crash_resume() -> None:
    """100/100 resumed runs match the uncrashed answer and the side-effect count is exact."""
    res = run("resilience.crash-resume")
    f = res.facts
    k = f["keyed"]
    assert f"made exactly {k['effects_made']} effects" in res.answer
    assert k["matched"] == k["runs"] == 100
    assert k["effects_made"] == k["effects_expected"] == 200 and k["duplicates"] == 0
    assert f["keyless"]["duplicates"] > 0  # the same crashes without keys do repeat effects
