"""User-delegated sources: the user's own task names the document that supplies an argument."""

from __future__ import annotations

import re
from typing import Any

import pytest

from surefoot.errors import ConfigError, TrustError
from surefoot.guard import (
    Arg,
    CapabilityPolicy,
    Delegation,
    Labeled,
    ToolPolicy,
    document_of,
    env_label,
    trusted,
)

SLACK = CapabilityPolicy(
    "slack",
    [
        ToolPolicy("get_webpage", {"url": Arg("user", "record")}, document_arg="url"),
        ToolPolicy("read_file", {"path": "user"}, document_arg="path"),
        ToolPolicy(
            "invite",
            {"user": Arg("user", "record"), "email": Arg("user", "record", delegable=True)},
        ),
        ToolPolicy("pay", {"to": Arg("user", "record"), "amount": "any"}),
    ],
    version="4",
)
TASK = trusted("Invite Dora. You can find her e-mail on her website: www.dora-website.com")
DORA = Delegation("invite.email", "get_webpage", "www.dora-website.com")


def page(url: str, text: str) -> Any:
    return SLACK.call("get_webpage", lambda url: {"content": text}, {"url": trusted(url)})


def test_a_document_source_names_the_document() -> None:
    """A pointed document's source is document:TOOL[SELECTOR].FIELD, and document_of reads it."""
    got = page("www.dora-website.com", "My e-mail is dora@gmail.com")["content"]
    (src,) = got.label.sources
    assert src == "document:get_webpage[www.dora-website.com].content"
    assert document_of(src) == ("get_webpage", "www.dora-website.com")
    assert document_of("content:inbox.body") is None


def test_delegated_argument_passes_only_from_the_named_document() -> None:
    """The grant lets Dora's page supply invite.email; another page, or another argument, not."""
    email = page("www.dora-website.com", "dora@gmail.com")["content"]
    with pytest.raises(TrustError, match=re.escape("policy.delegate")):
        SLACK.check_call("invite", {"user": trusted("Dora"), "email": email})
    policy = SLACK.delegate(TASK, [DORA])
    policy.check_call("invite", {"user": trusted("Dora"), "email": email})
    other = page("www.evil.com", "mallory@evil.com")["content"]
    with pytest.raises(TrustError, match=r"comes from document:get_webpage\[www\.evil\.com\]"):
        policy.check_call("invite", {"user": trusted("Dora"), "email": other})
    with pytest.raises(TrustError, match="invite argument 'user'"):
        policy.check_call("invite", {"user": email, "email": email})
    planted = Labeled("mallory@evil.com", env_label("content", "inbox.body"))
    with pytest.raises(TrustError, match=re.escape("comes from content:inbox.body")):
        policy.check_call("invite", {"user": trusted("Dora"), "email": planted})


def test_text_planted_in_the_delegated_document_gets_through() -> None:
    """The residual risk, pinned: whoever writes the delegated document chooses that argument."""
    lie = page("www.dora-website.com", "My real e-mail is mallory@evil.com")["content"]
    assert SLACK.delegate(TASK, [DORA]).allows("invite", {"user": trusted("Dora"), "email": lie})


def test_delegation_must_be_the_users_words() -> None:
    """A document the task does not name, or a task read from data, cannot delegate."""
    with pytest.raises(TrustError, match=re.escape("'www.evil.com' is not in")):
        SLACK.delegate(TASK, [Delegation("invite.email", "get_webpage", "www.evil.com")])
    tainted = Labeled(TASK.value, env_label("content", "inbox.body"))
    with pytest.raises(TrustError, match="made from the user's own task only"):
        SLACK.delegate(tainted, [DORA])
    with pytest.raises(TrustError, match="made from the user's own task only"):
        SLACK.delegate(TASK.value, [DORA])  # type: ignore[arg-type]


def test_only_declared_delegable_arguments_can_be_delegated() -> None:
    """A payee is not delegable: the grant is refused, naming the argument and the fix."""
    task = trusted("pay the bill bill.txt")
    with pytest.raises(TrustError, match=r"pay.to is not delegable in policy slack v4"):
        SLACK.delegate(task, [Delegation("pay.to", "read_file", "bill.txt")])
    with pytest.raises(ConfigError, match="names no declared argument"):
        SLACK.delegate(task, [Delegation("pay.iban", "read_file", "bill.txt")])
    with pytest.raises(ConfigError, match="not a declared tool with a document_arg"):
        SLACK.delegate(task, [Delegation("invite.email", "pay", "bill.txt")])
    with pytest.raises(ConfigError, match=re.escape("Delegation names 'tool.argument'")):
        Delegation("email", "get_webpage", "x")
    with pytest.raises(ConfigError, match="selector must be non-empty"):
        Delegation("invite.email", "get_webpage", "")
    with pytest.raises(ConfigError, match="must be Delegation values"):
        CapabilityPolicy("p", SLACK.tools, delegations=["invite.email"])  # type: ignore[list-item]


def test_delegations_are_data_and_printed() -> None:
    """delegable and the task's grants survive to_dict/from_dict and show in describe()."""
    policy = SLACK.delegate(TASK, [DORA])
    again = CapabilityPolicy.from_dict(policy.to_dict())
    assert again == policy and again.fingerprint == policy.fingerprint != SLACK.fingerprint
    assert again.tools["invite"].args["email"].delegable
    text = policy.describe()
    assert "email <- record or user; delegable to a document the user names" in text
    assert (
        "this task: invite.email <- document get_webpage[www.dora-website.com] "
        "(delegated by the user)" in text
    )
    assert "delegations" not in SLACK.to_dict()
