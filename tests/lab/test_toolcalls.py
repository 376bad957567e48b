"""The tool-call parser reads calls from model text and counts malformed ones."""

from __future__ import annotations

from surefoot_lab.toolcalls import ToolCall, parse_tool_calls

TOOLS = ["add_finding", "send_email"]


def test_plain_json_call_with_object_arguments() -> None:
    """A bare {"name", "arguments"} object is one call with those arguments."""
    r = parse_tool_calls('{"name": "add_finding", "arguments": {"text": "cache"}}', TOOLS)
    assert r.calls == [ToolCall("add_finding", {"text": "cache"})]
    assert r.malformed == [] and r.ok


def test_arguments_as_json_string_in_a_code_fence() -> None:
    """Arguments given as a JSON string inside a fenced block are decoded."""
    text = 'Sure:\n```json\n{"name": "add_finding", "arguments": "{\\"text\\": \\"x\\"}"}\n```'
    assert parse_tool_calls(text, TOOLS).calls == [ToolCall("add_finding", {"text": "x"})]


def test_tool_call_tags_list_and_calls_wrapper() -> None:
    """<tool_call> tags, a JSON list and the {"calls": [...]} form all yield their calls."""
    text = (
        '<tool_call>{"name": "add_finding", "arguments": {"text": "a"}}</tool_call> '
        '[{"tool": "send_email", "args": {"to": "b"}}] '
        '{"calls": [{"tool": "add_finding", "args": {"text": "c"}}]}'
    )
    r = parse_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in r.calls] == [
        ("add_finding", {"text": "a"}),
        ("send_email", {"to": "b"}),
        ("add_finding", {"text": "c"}),
    ]


def test_openai_function_shape() -> None:
    """The {"type": "function", "function": {...}} shape is unwrapped."""
    text = '{"type": "function", "function": {"name": "send_email", "arguments": {"to": "x"}}}'
    assert parse_tool_calls(text, TOOLS).calls == [ToolCall("send_email", {"to": "x"})]


def test_function_call_syntax_keyword_and_positional() -> None:
    """name(key="v") and name("v") are read for known tools only."""
    r = parse_tool_calls('I will call add_finding(text="b, c)") then send_email("me")', TOOLS)
    assert r.calls == [
        ToolCall("add_finding", {"text": "b, c)"}),
        ToolCall("send_email", {"_positional": ["me"]}),
    ]
    assert parse_tool_calls('other_tool(text="x")', TOOLS).calls == []


def test_cut_off_json_call_is_malformed() -> None:
    """A call cut off by max_tokens counts as malformed, not as a call."""
    r = parse_tool_calls('{"name": "add_finding", "arguments": {"text": "the cache', TOOLS)
    assert r.calls == [] and len(r.malformed) == 1 and "cut-off" in r.malformed[0]


def test_unknown_tool_and_non_string_name_are_malformed() -> None:
    """Unknown tool names and a name that is an object count as malformed."""
    r = parse_tool_calls(
        '{"name": "delete_all", "arguments": {}} {"name": {"description": "Caching"}}', TOOLS
    )
    assert r.calls == [] and len(r.malformed) == 2
    assert "unknown tool 'delete_all'" in r.malformed[0]


def test_arguments_not_an_object_are_malformed() -> None:
    """Arguments that are a list or broken JSON text make the call malformed."""
    r = parse_tool_calls(
        '{"name": "add_finding", "arguments": [1]} {"name": "add_finding", "arguments": "{x"}',
        TOOLS,
    )
    assert r.calls == [] and len(r.malformed) == 2


def test_prose_and_data_objects_are_no_calls() -> None:
    """Prose and JSON data without a name key are neither calls nor malformed."""
    r = parse_tool_calls('The answer is {"value": 3} and [1, 2]. No tools needed.', TOOLS)
    assert r.calls == [] and r.malformed == [] and not r.ok


def test_broken_function_call_syntax_is_malformed() -> None:
    """A known tool name followed by arguments that never close is malformed."""
    r = parse_tool_calls('add_finding(text="unterminated', TOOLS)
    assert r.calls == [] and len(r.malformed) == 1


def test_without_tool_list_any_json_name_is_accepted() -> None:
    """With no tool list, JSON calls to any name parse and name(...) text is ignored."""
    r = parse_tool_calls('{"name": "anything", "arguments": {}} anything(x=1)')
    assert r.calls == [ToolCall("anything", {})]
