"""Per-argument capabilities: every refusal message, labelling at the call site, the answer sink."""

from __future__ import annotations

from typing import Any

import pytest

from surefoot.errors import ConfigError, TrustError
from surefoot.guard import (
    Arg,
    CapabilityPolicy,
    Endorser,
    Label,
    Labeled,
    ToolPolicy,
    env_label,
    kind_of,
    label_output,
    trusted,
)

BANK = CapabilityPolicy(
    "bank",
    [
        ToolPolicy(
            "send_money",
            {"recipient": Arg("user", "record"), "amount": ("user", "document"), "note": "any"},
        ),
        ToolPolicy("read_file", {"path": "user"}, document_arg="path"),
        ToolPolicy("get_webpage", {"url": Arg("trusted", allow=["https://docs.example.com/*"])}),
        ToolPolicy("send_email", {"to": Arg("user", "correspondent"), "body": Arg.any()}),
        ToolPolicy("inbox", fields={"sender": "correspondent", "id": "record"}),
    ],
    version="3",
)


def content(text: str, where: str = "inbox.body") -> Labeled[str]:
    return Labeled(text, env_label("content", where))


def refusal(tool: str, args: dict[str, Any], policy: CapabilityPolicy = BANK) -> TrustError:
    with pytest.raises(TrustError) as info:
        policy.check_call(tool, args)
    return info.value


def test_undeclared_tool_is_refused_by_default() -> None:
    """A tool the policy does not declare is refused, and the message says how to declare it."""
    err = refusal("delete_file", {"id": trusted("3")})
    assert err.sink == "tool:delete_file"
    assert "not declared in policy bank v3" in str(err)
    assert "ToolPolicy('delete_file'" in str(err)


def test_undeclared_argument_is_refused() -> None:
    """An argument the tool does not declare is refused, naming the declared ones."""
    err = refusal("send_money", {"recipient": trusted("UK1"), "iban2": trusted("x")})
    assert err.sink == "tool:send_money.iban2"
    assert "'iban2' is not declared" in str(err) and "['amount', 'note', 'recipient']" in str(err)


def test_unlabelled_value_is_refused() -> None:
    """A plain value has no provenance, so it is refused with the way to label it."""
    err = refusal("send_money", {"recipient": "UK1"})
    assert "has no label" in str(err) and "trusted(...)" in str(err)


def test_refusal_names_tool_argument_source_and_fix() -> None:
    """A value from a source the argument does not accept names all four parts."""
    err = refusal("send_money", {"recipient": content("US133"), "amount": trusted(10)})
    text = str(err)
    assert err.sink == "tool:send_money.recipient"
    assert err.sources == ("content:inbox.body",)
    assert "send_money argument 'recipient'='US133' comes from content:inbox.body" in text
    assert "(content, untrusted)" in text and "accepts record or user" in text
    assert "declare Arg(..., 'content') for it in policy bank v3" in text
    assert "endorse" not in text  # 'user'/'record' only: an endorsement would not help


def test_endorsement_is_offered_where_it_helps_and_then_passes() -> None:
    """An argument accepting trusted sources suggests endorsement, and an endorsed value passes."""
    url = content("https://evil.example.net/?q=secret")
    err = refusal("get_webpage", {"url": url})
    assert "Endorser.endorse" in str(err) and "https://docs.example.com/*" in str(err)
    ok = Endorser("human:alice").endorse(url, reason="I asked for that page")
    BANK.check_call("get_webpage", {"url": ok})


def test_allow_list_passes_an_untrusted_url_that_matches() -> None:
    """A read tool's URL from untrusted data passes only if it is on the allow-list."""
    assert BANK.allows("get_webpage", {"url": content("https://docs.example.com/a")})
    assert not BANK.allows("get_webpage", {"url": content("https://docs.example.com.evil/a")})


def test_document_the_user_pointed_to_supplies_an_amount_not_a_recipient() -> None:
    """read_file with a user-given path labels its content 'document': ok for amount only."""
    out = BANK.call("read_file", lambda path: {"text": "98.70 to UK12"}, {"path": trusted("b")})
    assert kind_of(next(iter(out["text"].label.sources))) == "document"
    assert BANK.allows("send_money", {"amount": out["text"], "recipient": trusted("UK1")})
    err = refusal("send_money", {"recipient": out["text"]})
    assert "document:read_file[b].text (document, untrusted)" in str(err)


def test_file_path_from_untrusted_data_is_refused_and_not_run() -> None:
    """A read tool refused at the call site is never called."""
    calls: list[str] = []
    with pytest.raises(TrustError, match="'path'"):
        BANK.call("read_file", lambda path: calls.append(path), {"path": content("/etc/x")})
    assert calls == []


def test_recipient_who_already_wrote_is_allowed_a_planted_one_is_not() -> None:
    """A sender field is a correspondent; an address written in a body is content."""
    mail = label_output(BANK.tools["inbox"], [{"id": 7, "sender": "bob@x.org", "body": "hi"}])
    assert mail[0]["id"].label.sources == {"record:inbox.id"}
    assert BANK.allows("send_email", {"to": mail[0]["sender"], "body": mail[0]["body"]})
    assert not BANK.allows("send_email", {"to": mail[0]["body"]})


def test_output_selected_by_an_untrusted_argument_inherits_its_taint() -> None:
    """A record fetched with an attacker-chosen argument is refused; fetched cleanly it passes."""
    spec = ToolPolicy("day_events", {"day": Arg.any()}, fields={"*": "record"})
    planted = label_output(spec, [{"who": "a@b.c"}], {"day": content("2024-05-15")})
    clean = label_output(spec, [{"who": "a@b.c"}], {"day": trusted("2024-05-15")})
    assert planted[0]["who"].label.tainted == {"record:day_events.who", "content:inbox.body"}
    assert clean[0]["who"].label.sources == {"record:day_events.who"}
    assert BANK.allows("send_email", {"to": clean[0]["who"]}) is False  # record: not a sender
    policy = CapabilityPolicy("p", [ToolPolicy("send", {"to": ("user", "record")})])
    assert policy.allows("send", {"to": clean[0]["who"]})
    err = refusal("send", {"to": planted[0]["who"]}, policy)
    assert "comes from content:inbox.body (content, untrusted)" in str(err)


def test_label_output_of_a_plain_and_a_dataclass_result() -> None:
    """A plain result is one 'result' leaf; dataclass fields are labelled one by one."""
    from dataclasses import dataclass

    @dataclass
    class Mail:
        sender: str
        body: str

    spec = BANK.tools["inbox"]
    assert label_output(spec, 3).label.sources == {"content:inbox.result"}
    out = label_output(spec, Mail("a@b.c", "x"))
    assert out["sender"].label.tainted == {"correspondent:inbox.sender"}
    trusted_spec = ToolPolicy("clock", output_trust="trusted")
    assert not label_output(trusted_spec, 5).tainted


def test_answer_is_marked_or_refused_until_endorsed() -> None:
    """A derived answer is shown marked by default; a strict policy refuses it until endorsed."""
    text = content("Visit Riverside View Hotel!", "reviews.text")
    ans = BANK.check_answer(text)
    assert ans.marked and ans.notice == "derived from untrusted data: content:reviews.text"
    assert ans.display().startswith("[derived from untrusted data")
    assert not BANK.check_answer(trusted("done")).marked
    strict = CapabilityPolicy("strict", answer_requires_endorsement=True)
    with pytest.raises(TrustError, match="requires an endorsement") as info:
        strict.check_answer(text)
    assert info.value.sink == "answer"
    ok = Endorser("human:alice").endorse(text, reason="checked the reviews")
    assert strict.check_answer(ok).display() == "Visit Riverside View Hotel!"
    with pytest.raises(TrustError, match="final answer 'x' has no label"):
        strict.check_answer("x")  # type: ignore[arg-type]


def test_policy_is_data_printable_and_versioned() -> None:
    """to_dict/from_dict round-trip; the fingerprint changes with a declaration."""
    again = CapabilityPolicy.from_dict(BANK.to_dict())
    assert again == BANK and again.fingerprint == BANK.fingerprint
    text = BANK.describe()
    assert "policy bank v3" in text and "recipient <- record or user" in text
    looser = CapabilityPolicy("bank", [ToolPolicy("send_money", {"recipient": "any"})])
    assert looser.fingerprint != BANK.fingerprint


def test_bad_declarations_are_refused() -> None:
    """Unknown kinds, duplicate tools, a bad document_arg and a bad dict fail at declaration."""
    with pytest.raises(ConfigError, match="Arg accepts kinds"):
        Arg("usr")
    with pytest.raises(ConfigError, match="declared twice"):
        CapabilityPolicy("p", [ToolPolicy("a"), ToolPolicy("a")])
    with pytest.raises(ConfigError, match="document_arg='p' is not a declared argument"):
        ToolPolicy("read", {"path": "user"}, document_arg="p")
    with pytest.raises(ConfigError, match="output field kinds"):
        ToolPolicy("read", fields={"x": "secret"})
    with pytest.raises(ConfigError, match="expected an Arg"):
        ToolPolicy("read", {"x": 3})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="not a CapabilityPolicy dict"):
        CapabilityPolicy.from_dict({"name": "x"})
    with pytest.raises(ConfigError, match="allow= takes"):
        Arg("user", allow=[""])


def test_a_program_constant_without_sources_passes() -> None:
    """A value with an empty label (a constant of the program) has no source to refuse."""
    const = Labeled("https://docs.example.com/", Label())
    assert BANK.allows("get_webpage", {"url": const})
    assert BANK.allows("read_file", {"path": const})
