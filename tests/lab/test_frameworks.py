"""durable.frameworks: one PydanticAI agent on surefoot, DBOS and Temporal in real worker
processes, SIGKILLed mid-run at random. surefoot completes every run and repeats no
journalled model request and no booking effect (counted by the agent's ledger, outside every
engine); each peer gets a row of its own, measured, or saying why it was not run."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

import surefoot_lab as lab
from surefoot_lab import LabContext, Table
from surefoot_lab.durable import frameworks


def test_quick_run_survives_kills_with_no_repeat_of_completed_work(tmp_path: Path) -> None:
    exp = next(e for e in lab.experiments() if e.id == "durable.frameworks")
    assert exp.exercise == "Hard 1, Hard 2"
    absent = "the local model is absent (llama-cpp-python is not installed)"
    result = exp.run(LabContext(workdir=tmp_path, quick=True, llm_absent=absent))
    f = result.facts
    assert f["kills"] >= 1, f  # the workers were killed at least once mid-run
    assert f["completed"] == f["runs"] == 4, f
    assert f["repeated_after_journal"] == 0, f
    assert f["duplicate_effects"] == 0, f
    assert f["runs_without_effect"] == 0, f
    assert f["effect_requests"] >= f["runs"], f
    # each run's 3 requests were made; only requests in flight at a kill ran twice
    assert f["model_calls"] == 3 * f["runs"] + f["repeated_model_calls"], f
    assert f["repeated_model_calls"] <= f["kills"] * 4, f  # at most 4 runs per worker at once
    # one row per engine: measured, or one line saying why not
    (table,) = result.tables
    assert [row[0] for row in table.rows] == ["surefoot", "dbos", "temporal"]
    for name in ("dbos", "temporal"):
        peer = f["engines"][name]
        assert not peer.get("failed"), peer
        if "skipped" in peer:
            continue
        assert peer["runs"] == 2, peer
        assert peer["completed"] == peer["runs"], peer  # both peers recover a killed run
        assert peer["runs_without_effect"] == 0, peer
        assert peer["model_calls"] == 3 * peer["runs"] + peer["repeated_model_calls"], peer
    # --llm local asked for without the model: the FunctionModel's figures, saying so
    assert "FunctionModel" in result.model and absent in result.model
    assert absent in result.answer


def test_an_engine_that_is_not_installed_is_a_row_saying_so() -> None:
    t = Table("t", ["engine", "completed", "a", "b"])
    skipped = frameworks._peer("dbos is not installed (the lab's `dbos` extra)", dict)
    frameworks._row(t, "dbos", skipped)
    assert t.rows == [["dbos", "not run: dbos is not installed (the lab's `dbos` extra)", "-", "-"]]
    assert "dbos: not run (dbos is not installed" in frameworks._sentence("dbos", skipped)


def test_a_peer_that_fails_is_a_row_saying_so_not_a_failed_experiment() -> None:
    def boom() -> dict[str, object]:
        raise TimeoutError("the DBOS worker did not start")

    failed = frameworks._peer(None, boom)
    assert failed == {
        "skipped": "failed: TimeoutError: the DBOS worker did not start",
        "failed": True,
    }


def test_on_an_endpoint_every_engine_asks_the_real_model_for_each_final_answer(
    tmp_path: Path,
) -> None:
    """--llm URL (surefoot's FakeProvider as the endpoint): the workers of all three engines
    ask it for each run's final answer inside the engine's model step; the answer names
    the model as the endpoint reports it."""
    from surefoot.testing import FakeProvider
    from surefoot_lab.local_model import lab_model

    exp = next(e for e in lab.experiments() if e.id == "durable.frameworks")
    with FakeProvider(model="served-model-7") as fp, lab_model(fp.openai_url) as m:
        result = exp.run(LabContext(workdir=tmp_path, quick=True, llm=m))
        received = fp.count()
    engines = result.facts["engines"]
    ran = [r for r in engines.values() if "skipped" not in r]
    for r in ran:
        assert r["completed"] == r["runs"], r
        assert r["real_model_answers"] >= r["runs"], r  # one per run, more if one was cut off
    assert received >= sum(r["real_model_answers"] for r in ran)  # a kill may cut one off
    assert "served-model-7" in result.model and "served-model-7" in result.answer
