"""durable.frameworks: a PydanticAI agent on surefoot in real worker processes, SIGKILLed
mid-run at random, completes every run and repeats no journalled model request and no
booking effect (counted by the agent's ledger, outside the journal)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

import surefoot_lab as lab
from surefoot_lab import LabContext


def test_quick_run_survives_kills_with_no_repeat_of_completed_work(tmp_path: Path) -> None:
    exp = next(e for e in lab.experiments() if e.id == "durable.frameworks")
    assert exp.exercise == "Hard 1, Hard 2"
    result = exp.run(LabContext(workdir=tmp_path, quick=True))
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
    assert "FunctionModel" in result.model
