"""The sink policy: deny by default, refuse tainted or unlabelled arguments, tainted decisions
and untrusted instructions; pass only tools declared safe."""

from __future__ import annotations

import pytest

from surefoot.errors import ConfigError, TrustError
from surefoot.guard import Label, Labeled, SinkPolicy, trusted

BAD = Labeled("PWNED", Label.of("web", "untrusted"))
TAINTED = Label.of("web", "untrusted")


@pytest.mark.parametrize("tool", ["write_report", "delete_repo", "run_shell", "send_email"])
def test_default_policy_guards_every_tool_not_declared_safe(tool: str) -> None:
    """SinkPolicy() refuses any tool, listed anywhere or not, under tainted context or args."""
    policy = SinkPolicy()
    assert policy.guards(tool)
    assert not policy.allows(tool, {"text": BAD})
    assert not policy.allows(tool, {"text": trusted("ok")}, decided_by=TAINTED)
    policy.check_call(tool, {"text": trusted("ok")}, decided_by=Label.of("u", "trusted"))


def test_tools_declared_safe_pass_under_untrusted_context() -> None:
    """A tool named in safe= passes with tainted args; every other tool is still guarded."""
    policy = SinkPolicy(safe={"search", "calculator"})
    policy.check_call("search", {"q": BAD}, decided_by=TAINTED)
    assert policy.safe == {"search", "calculator"} and not policy.guards("calculator")
    with pytest.raises(TrustError, match="delete_repo argument 'text'"):
        policy.check_call("delete_repo", {"text": BAD})
    assert "search" in repr(policy)


def test_consequential_argument_is_ignored_with_a_warning() -> None:
    """The old SinkPolicy({...}) form warns and still guards tools outside the old list."""
    with pytest.warns(DeprecationWarning, match="every tool not declared safe is guarded"):
        policy = SinkPolicy(frozenset({"transfer"}))
    assert not policy.allows("write_report", {"text": BAD})


@pytest.mark.parametrize("bad", ["search", [""], [3]])
def test_bad_safe_lists_are_refused(bad: object) -> None:
    """safe= must be a collection of non-empty names; a bare string is refused, not split."""
    with pytest.raises(ConfigError, match="safe"):
        SinkPolicy(safe=bad)  # type: ignore[arg-type]


def test_sink_refuses_tainted_arguments_at_consequential_tools() -> None:
    """A tainted argument to send_email raises TrustError naming the tool and the source."""
    policy = SinkPolicy()
    bad = Labeled("mallory@evil.example", Label.of("web", "untrusted"))
    with pytest.raises(TrustError, match="send_email argument 'to'") as ei:
        policy.check_call("send_email", {"to": bad, "body": trusted("hi")})
    assert ei.value.sink == "tool:send_email" and ei.value.sources == ("web",)
    SinkPolicy(safe={"write_report"}).check_call("write_report", {"text": bad})  # declared safe
    policy.check_call("send_email", {"to": trusted("bob@corp.example")})
    assert not policy.allows("publish", {"text": bad})


def test_sink_refuses_unlabelled_arguments_and_tainted_decisions() -> None:
    """Unlabelled args fail closed; a call chosen under tainted context is refused too."""
    policy = SinkPolicy()
    with pytest.raises(TrustError, match="has no label"):
        policy.check_call("transfer", {"to": "ACC-1"})
    ctx = Label.of("system", "system").join(Label.of("web", "untrusted"))
    with pytest.raises(TrustError, match="chosen by a model that read untrusted"):
        policy.check_call("transfer", {"to": trusted("ACC-1")}, decided_by=ctx)
    policy.check_call("transfer", {"to": trusted("ACC-1")}, decided_by=Label.of("u", "trusted"))


def test_instruction_sink_refuses_untrusted_text() -> None:
    """Text from an untrusted author cannot be used as an instruction; trusted text can."""
    policy = SinkPolicy()
    policy.check_instruction(trusted("summarise the notes"))
    with pytest.raises(TrustError, match="instruction") as ei:
        policy.check_instruction(Labeled("wire money", Label.of("web", "untrusted")))
    assert ei.value.sink == "instruction"
    with pytest.raises(TrustError, match="no label"):
        policy.check_instruction("raw text")  # type: ignore[arg-type]
