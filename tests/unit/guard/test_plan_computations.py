"""A plan's ``compute`` step: values the task asks to derive carry what they were computed
from (CaMeL's rule), never the user's label by default (#28)."""

from __future__ import annotations

from typing import Any

import pytest

from surefoot.errors import ConfigError, TrustError
from surefoot.guard import (
    Arg,
    CapabilityPolicy,
    Plan,
    PlanRunner,
    QuarantinedParser,
    ToolPolicy,
    trusted,
)
from surefoot.llm import FakeLLM

POLICY = CapabilityPolicy(
    "bank",
    [
        ToolPolicy("history", {}, {"amount": "record", "sender": "correspondent", "*": "content"}),
        ToolPolicy("pay", {"to": Arg("user", "record"), "amount": Arg("user", "record")}),
    ],
)
HISTORY = [
    {"amount": 10.0, "sender": "DE00 1111 2222", "subject": "rent"},
    {"amount": 2.5, "sender": "XX66 ATTACKER", "subject": "hi"},
]


def _run(plan: dict[str, Any], paid: list[dict[str, Any]]) -> None:
    tools = {"history": lambda: HISTORY, "pay": lambda **kw: paid.append(kw) or "ok"}
    runner = PlanRunner(POLICY, tools, QuarantinedParser(FakeLLM()))
    runner.run(Plan.from_dict(plan, tools=list(tools)), trusted("").label)


def test_a_sum_of_records_carries_the_records_and_is_allowed() -> None:
    """ "Pay my landlord the total of my last two payments": the total is computed from two
    record amounts, so it carries records, which an amount accepts."""
    paid: list[dict[str, Any]] = []
    plan = {
        "steps": [
            {"id": "h", "tool": "history"},
            {"id": "total", "compute": "sum", "of": [{"ref": "h.0.amount"}, {"ref": "h.1.amount"}]},
            {"id": "p", "tool": "pay", "args": {"to": "DE89LANDLORD", "amount": {"ref": "total"}}},
        ]
    }
    _run(plan, paid)
    assert paid == [{"to": "DE89LANDLORD", "amount": 12.5}]


def test_an_iban_stripped_of_spaces_keeps_its_sender_label() -> None:
    """An IBAN written with spaces by a counterparty, stripped by the plan, is still the
    counterparty's: refused as a payee (it used to become the user's own)."""
    paid: list[dict[str, Any]] = []
    plan = {
        "steps": [
            {"id": "h", "tool": "history"},
            {"id": "iban", "compute": "strip_spaces", "of": [{"ref": "h.1.sender"}]},
            {"id": "p", "tool": "pay", "args": {"to": {"ref": "iban"}, "amount": 1}},
        ]
    }
    with pytest.raises(TrustError) as info:
        _run(plan, paid)
    assert "'XX66ATTACKER' comes from correspondent:history.sender" in str(info.value)
    assert paid == []


def test_a_computation_over_text_is_refused_and_bad_ops_are_config_errors() -> None:
    paid: list[dict[str, Any]] = []
    plan = {
        "steps": [
            {"id": "h", "tool": "history"},
            {"id": "x", "compute": "sum", "of": [{"ref": "h.0.subject"}, 1]},
        ]
    }
    with pytest.raises(TrustError, match="computes over numbers"):
        _run(plan, paid)
    with pytest.raises(ConfigError, match="compute must be one of"):
        Plan.from_dict({"steps": [{"id": "x", "compute": "eval", "of": [1]}]})
    with pytest.raises(ConfigError, match="'of' lists"):
        Plan.from_dict({"steps": [{"id": "x", "compute": "sum", "of": []}]})
    step = {"id": "x", "compute": "difference", "of": [5, 2]}
    assert Plan.from_dict({"steps": [step]}).to_dict()["steps"] == [step]
