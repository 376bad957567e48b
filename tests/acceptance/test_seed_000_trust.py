"""Seed 000, Hard 2 and Hard 3: resolvers and prompt injection, from the lab in quick mode."""

from __future__ import annotations

from typing import Any

import pytest

import surefoot_lab as lab


def _run(exp_id: str, **kw: Any) -> lab.LabResult:
    with lab.context(quick=True, **kw) as ctx:
        return lab.get(exp_id).run(ctx)


def test_hard2_resolvers_accuracy_and_cost_formula_vs_measured() -> None:
    """Each resolver's measured accuracy sits near its formula; costs are counted calls."""
    res = _run("statebus.resolvers")
    f = res.facts
    assert f["max_abs_diff"] < 0.06  # 600 fields per row in quick mode
    # two agents: vote falls back to priority on every split
    assert f["acc_measured[vote@0.75/0.75]"] == f["acc_measured[priority@0.75/0.75]"]
    # three agents: vote beats one agent, and a 0.9 judge beats the vote at a call cost
    assert f["acc_formula[vote@0.75/0.75/0.75]"] == pytest.approx(0.84375)
    assert f["acc_measured[vote@0.75/0.75/0.75]"] > f["acc_measured[priority@0.75/0.75/0.75]"]
    assert f["calls_measured[judge@0.75/0.75/0.75@q0.9]"] > 0
    assert f["calls_measured[vote@0.75/0.75/0.75]"] == 0
    # a strong lead: priority beats the vote of weaker agents
    assert f["acc_measured[priority@0.9/0.6/0.6]"] > f["acc_measured[vote@0.9/0.6/0.6]"]
    table = res.tables[0]
    assert "accuracy (formula)" in table.columns and "accuracy (measured)" in table.columns
    assert len(table.rows) == 7 * 4
    assert "FakeLLM" in table.note and res.model == lab.FAKE_MODEL


def test_hard3_injection_acted_and_each_mitigation_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The assistant acts on planted instructions; labels+sink stop every one; misses named."""
    monkeypatch.delenv("SUREFOOT_LLM_BASE_URL", raising=False)
    res = _run("statebus.injection")
    f = res.facts
    assert f["attacks"] >= 30 and f["acted_none"] > 0 and f["acted_combined"] == 0
    assert f["attack_success[none]"] > 0
    assert f["attack_success[trust labels + sink policy]"] == 0
    assert f["attack_success[all combined]"] == 0
    assert f["category[schema validation][control_field]"] == 0
    assert f["category[schema validation][free_text]"] > 0
    assert f["category[all combined, relay endorses its output][relayed]"] > 0
    assert f["benign_success[all combined]"] < f["benign_success[none]"]
    assert f["poison_success[all combined]"] == 0  # deny by default guards write_report
    assert f["poison_success[all combined, write_report declared safe]"] > 0
    mitigations = [r[0] for r in res.tables[0].rows]
    for name in ("none", "schema validation", "scoped views", "trust labels + sink policy"):
        assert name in mitigations
    # "Yes" is chosen by the fact that the assistant acted, with the count from the facts
    assert res.answer.startswith(
        f"Yes: with no mitigation the assistant acted on {f['acted_none']}"
    )
    assert res.model == lab.FAKE_MODEL
    assert res.params["obedience"]["obey_plain"] == 0.6
    _answer_agrees_with_facts(res.answer, f)


def _answer_agrees_with_facts(answer: str, f: dict[str, Any]) -> None:
    """Every mitigation's figures in the answer are its facts; poisoning is named by fact."""
    names = [k[len("attack_success[") : -1] for k in f if k.startswith("attack_success[")]
    for name in names[1:]:
        sentence = (
            f"Under {name!r}: attack success {100 * f[f'attack_success[{name}]']:.1f}%, benign "
            f"{100 * f[f'benign_success[{name}]']:.1f}%, report poisoning "
            f"{100 * f[f'poison_success[{name}]']:.1f}%"
        )
        assert sentence in answer
    tail = answer.rsplit("Report poisoning still got through under: ", 1)[1]
    leaked = {n for n in names[1:] if f[f"poison_success[{n}]"] > 0}
    assert {n for n in names[1:] if repr(n) in tail} == leaked
