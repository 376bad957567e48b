"""Seed 002, Hard 2: the agent ported to Temporal and DBOS survives kill -9, no step re-run."""

from __future__ import annotations

import sys
from typing import Any

import dbos  # installed by `make test` (the lab's `dbos` extra): this test must not skip
import pytest

import surefoot_lab as lab
from surefoot.errors import ConfigError, MissingExtraError
from surefoot_lab.agent import STEPS, port_dbos, port_temporal


def run(exp_id: str, model: str = lab.FAKE_MODEL, **kwargs: Any) -> lab.LabResult:
    """Run one experiment in quick mode with seed 0."""
    with lab.context(quick=True, seed=0, **kwargs) as ctx:
        result = lab.get(exp_id).run(ctx)
    assert result.tables and result.answer
    assert result.model == model
    return result


@pytest.fixture(scope="module")
def port_result() -> lab.LabResult:
    """The quick run of durable.port, shared by the tests below (it takes ~35 s)."""
    assert dbos.DBOS is not None
    return run("durable.port")


@pytest.fixture(scope="module")
def facts(port_result: lab.LabResult) -> dict[str, Any]:
    """The facts of the shared quick run of durable.port."""
    return port_result.facts


def test_port_answer_agrees_with_facts(port_result: lab.LabResult) -> None:
    """The port's answer states the counts and statuses its facts hold."""
    f, a = port_result.facts, port_result.answer
    for engine in ("temporal", "dbos", "surefoot") if f["temporal"] else ("dbos", "surefoot"):
        rows = list(f[engine].values())
        ok = sum(1 for r in rows if r["succeeded"])
        rep = sum(r["repeated_for_journalled_steps"] for r in rows)
        dup = sum(r["duplicate_posts"] for r in rows)
        assert f"{engine}: {ok} of {len(rows)} killed runs finished" in a
        assert f"with {rep} repeated calls" in a.split(f"{engine}: ", 1)[1]
        tail = a.split(f"{engine}: ", 1)[1].split(";")[0]
        assert ("no duplicate post" if dup == 0 else f"{dup} duplicate posts") in tail
    if f["temporal"]:
        t = f["temporal_summary"]
        assert f"ran again in {t['in_flight_reran']} of {t['in_flight_rows']} kills" in a
        tuned = port_temporal.TUNED.name
        med, n = t["resumed_in_s_median"][tuned], t["resumed_kills"][tuned]
        assert f"median {med} s over {n} kills with {tuned}" in a
        assert f"next activity {t['server_resumed_in_s']:.2f} s after the kill" in a
    else:
        assert f"Temporal: not measured ({f['temporal_skipped']})" in a
    d, s = f["replacement"]["dbos"], f["replacement"]["surefoot"]
    assert f"DBOS's run stayed {d['status_while_replacement_ran']}" in a
    assert f"surefoot's run ended {s['status']}" in a


def test_hard2_port_kill9(facts: dict[str, Any]) -> None:
    """A SIGKILLed DBOS worker's run finishes after restart; recorded steps are never re-called."""
    f = facts
    assert "skipped" not in f
    assert f["dbos_all_succeeded"] is True
    assert f["dbos_repeated_for_journalled_steps"] == 0
    assert f["dbos_duplicate_posts"] == 0
    (point,) = [k for k in f["dbos"] if k.endswith("(request)")]
    d, s = f["dbos"][point], f["surefoot"][point]
    step = point.split()[0]
    before = STEPS[: STEPS.index(step)]
    for r in (d, s):
        assert set(before) <= set(r["journalled_before_kill"])
        assert r["succeeded"] is True
        assert r["repeated_for_journalled_steps"] == 0
        assert r["model_calls"] == 3
        assert all(n == 1 for n in r["calls_per_step"].values())
    # killed after the model answered, before DBOS recorded the step: the call is paid again
    summ = f["dbos"]["summarize (reply)"]
    assert summ["journalled_before_kill"] == ["plan", "search", "read"]
    assert summ["calls_per_step"]["summarize"] == 2 and summ["model_calls"] == 4
    assert summ["calls_per_step"]["plan"] == 1 and summ["repeated_after_journal"] == 0
    # the same for the publish: requested twice, one post (workflow id + step id as key)
    pub = f["dbos"]["publish (reply)"]
    assert pub["calls_per_step"]["publish"] == 2
    assert pub["posts"] == 1 and pub["duplicate_posts"] == 0


def test_hard2_temporal_port_kill9(facts: dict[str, Any], temporal_bin: str) -> None:
    """On Temporal, worker and server SIGKILLs: every run completes, no completed step re-called."""
    f = facts
    assert f["temporal_skipped"] is None and temporal_bin
    t = f["temporal_summary"]
    assert t["all_succeeded"] is True and t["server_kill_succeeded"] is True
    assert t["repeated_for_journalled_steps"] == 0  # the seed's Done-when, on Temporal
    assert t["repeated_after_journal"] == 0 and t["duplicate_posts"] == 0
    (point,) = [k for k in f["dbos"] if k.endswith("(request)")]
    step = point.split()[0]
    label = f"{step} (waiting) [tuned]" if step == "approve" else f"{point} [tuned]"
    r = f["temporal"][label]
    before = STEPS[: STEPS.index(step)]
    assert set(before) - {"approve"} <= set(r["journalled_before_kill"])
    assert r["succeeded"] is True and r["repeated_for_journalled_steps"] == 0
    assert all(r["calls_per_step"][s] == 1 for s in before if s != "approve")
    assert r["posts"] == 1 and r["duplicate_posts"] == 0
    server = f["temporal"]["summarize (server killed) [tuned]"]
    assert server["target"] == "server" and server["succeeded"] is True
    assert server["repeated_for_journalled_steps"] == 0
    assert f["temporal_server"]["ready_after_restart_s"] is not None


def test_port_replacement_worker(facts: dict[str, Any]) -> None:
    """DBOS leaves a dead executor's run pending for a new executor id; surefoot's lease doesn't."""
    rep = facts["replacement"]
    d, s = rep["dbos"], rep["surefoot"]
    assert d["steps_while_replacement_ran"] == 0 and d["status_while_replacement_ran"] == "PENDING"
    assert d["status_after_original_id_restarted"] == "SUCCESS"
    assert d["repeated_for_journalled_steps"] == 0
    assert s["status"] == "succeeded"
    assert s["calls_per_step"]["plan"] == 1 and s["calls_per_step"]["search"] == 1


def test_port_rejects_unknown_kill_point(tmp_path: Any) -> None:
    """The kill harness names the bad step or window instead of running."""
    with pytest.raises(ConfigError, match="'nowhere'"):
        port_dbos.kill_dbos_mid_run(tmp_path / "s.db", tmp_path / "l.db", kill_at="nowhere")
    with pytest.raises(ConfigError, match="approve"):
        port_dbos.kill_dbos_mid_run(
            tmp_path / "s.db", tmp_path / "l.db", kill_at="approve", window="reply"
        )


def test_port_without_dbos_says_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without dbos the port raises MissingExtraError and the experiment reports 'skipped'."""
    monkeypatch.setitem(sys.modules, "dbos", None)  # makes `import dbos` fail
    with pytest.raises(MissingExtraError, match=r"surefoot-lab\[dbos\]") as info:
        port_dbos.dbos_module()
    assert (info.value.distribution, info.value.extra) == ("surefoot-lab", "dbos")
    assert "pip install './lab[dbos]'" in str(info.value)
    f = run("durable.port", model=lab.NO_MODEL).facts  # nothing ran: no model was called
    assert f == {"skipped": str(info.value)}
