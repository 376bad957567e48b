"""Tool calls read from a model's text, for servers (and small models) that return none.

llama.cpp's server with SmolLM2 puts no ``tool_calls`` in its replies: when the model calls
a tool at all, it writes the call as text, in one of several shapes. :func:`parse_tool_calls`
reads the shapes seen in practice and counts what looked like a call but was not one, so a
lab report can say how often a weak model got the format wrong:

* a JSON object ``{"name": "add", "arguments": {...}}`` (``arguments`` may be a JSON string),
  alone, in a list, in a code fence or in ``<tool_call>…</tool_call>`` tags;
* ``{"tool": "add", "args": {...}}`` and ``{"calls": [...]}`` of those;
* a function-call line ``add(text="…")`` or ``add("…")`` for a known tool name.

Malformed: a JSON object cut off (by ``max_tokens``) or broken after a call began, a call
naming no tool or an unknown one, arguments that are not an object, a known tool name
followed by ``(`` whose arguments do not parse.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall", "ToolCalls", "ToolReply", "ask_tool_call", "parse_tool_calls"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call: the tool's name and its arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class ToolCalls:
    """What a reply held: the calls that parsed, and why the others did not."""

    calls: list[ToolCall] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """At least one call parsed and nothing looked broken."""
        return bool(self.calls) and not self.malformed


_NAME_KEYS = ("name", "tool", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "input")


def _one(obj: Any, tools: set[str] | None, out: ToolCalls) -> None:
    if isinstance(obj, list):
        for item in obj:
            _one(item, tools, out)
        return
    if not isinstance(obj, dict):
        return
    if isinstance(obj.get("calls"), list):
        _one(obj["calls"], tools, out)
        return
    if isinstance(obj.get("function"), dict):  # OpenAI's {"type": "function", "function": {…}}
        _one(obj["function"], tools, out)
        return
    name = next((obj[k] for k in _NAME_KEYS if k in obj), None)
    if name is None:
        return  # a JSON object that is not a call (data the model quoted)
    if not isinstance(name, str) or not name:
        out.malformed.append(f"tool name is not a string: {name!r}"[:120])
        return
    if tools is not None and name not in tools:
        out.malformed.append(f"unknown tool {name!r}"[:120])
        return
    args: Any = next((obj[k] for k in _ARG_KEYS if k in obj), {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            out.malformed.append(f"{name}: arguments are not JSON: {args!r}"[:120])
            return
    if not isinstance(args, dict):
        out.malformed.append(f"{name}: arguments are not an object: {args!r}"[:120])
        return
    out.calls.append(ToolCall(name, args))


def _json_objects(text: str, out: ToolCalls, tools: set[str] | None) -> list[tuple[int, int]]:
    """Decode every top-level JSON object or list in ``text``; return the spans used."""
    dec = json.JSONDecoder()
    spans: list[tuple[int, int]] = []
    i = 0
    while True:
        m = re.compile(r"[\[{]").search(text, i)
        if m is None:
            return spans
        start = m.start()
        try:
            obj, end = dec.raw_decode(text, start)
        except ValueError:
            rest = text[start:]
            looks_like_call = text[start] == "{" and re.match(
                r'\{\s*"(name|tool|function|calls)"\s*:', rest
            )
            if looks_like_call:
                out.malformed.append(f"broken or cut-off JSON call: {rest[:80]!r}")
                return spans
            i = start + 1
            continue
        before = len(out.calls) + len(out.malformed)
        _one(obj, tools, out)
        if len(out.calls) + len(out.malformed) > before:
            spans.append((start, end))
        i = end


def _literal(node: ast.expr) -> Any:
    return ast.literal_eval(node)


def _function_calls(text: str, tools: Iterable[str], out: ToolCalls) -> None:
    for name in tools:
        for m in re.finditer(rf"(?<![\w.\"']){re.escape(name)}\s*\(", text):
            # the shortest closing parenthesis that makes a valid Python call expression
            src = None
            for close in [j for j in range(m.end(), len(text)) if text[j] == ")"]:
                candidate = text[m.start() : close + 1]
                try:
                    src = ast.parse(candidate, mode="eval").body
                    break
                except SyntaxError:
                    continue
            if not isinstance(src, ast.Call):
                out.malformed.append(f"{name}(: arguments do not parse: {text[m.start() :][:80]!r}")
                continue
            try:
                args = {kw.arg or "**": _literal(kw.value) for kw in src.keywords}
                positional = [_literal(a) for a in src.args]
            except ValueError:
                out.malformed.append(
                    f"{name}: arguments are not literals: {text[m.start() :][:80]!r}"
                )
                continue
            if positional:
                args["_positional"] = positional
            out.calls.append(ToolCall(name, args))


def parse_tool_calls(text: str, tools: Iterable[str] | None = None) -> ToolCalls:
    """The tool calls written in ``text``, and what looked like a call but was malformed.

    Args:
        text: the model's reply.
        tools: the known tool names: calls to other names count as malformed, and only
            these are recognised in the ``name(...)`` form. None: any name, JSON forms only.

    Positional arguments of the ``name("…")`` form come back under ``"_positional"``.
    """
    known = None if tools is None else set(tools)
    out = ToolCalls()
    spans = _json_objects(text, out, known)
    if known:
        rest = text
        for a, b in reversed(spans):  # do not read a name inside a JSON call twice
            rest = rest[:a] + " " * (b - a) + rest[b:]
        _function_calls(rest, sorted(known), out)
    return out


@dataclass(slots=True)
class ToolReply:
    """What :func:`ask_tool_call` got: the call (None when every attempt was malformed),
    the last reply's text, and how many replies were refused as malformed."""

    call: ToolCall | None
    text: str
    malformed_replies: int
    reasons: list[str] = field(default_factory=list)


def ask_tool_call(
    client: Any, messages: list[dict[str, Any]], tool: str, **params: Any
) -> ToolReply:
    """Ask ``client`` (a ``surefoot.llm`` client) for one call to ``tool``, parsed from text.

    A reply without a well-formed call to ``tool`` is refused by the client's reply check,
    so surefoot's retry policy asks again (within its attempts and budget); when attempts
    run out the last text comes back with ``call=None``. ``params`` go to ``create``.
    """
    from surefoot.errors import InvalidReplyError

    reasons: list[str] = []

    def check(text: str) -> ToolCall:
        parsed = parse_tool_calls(text, [tool])
        if not parsed.calls:
            why = "; ".join(parsed.malformed) or "no tool call in the reply"
            reasons.append(why)
            raise ValueError(why)
        return parsed.calls[0]

    try:
        reply = client.create(messages=messages, schema=check, **params)
    except InvalidReplyError as exc:
        return ToolReply(None, exc.text, len(reasons), reasons)
    return ToolReply(reply.parsed, reply.text, len(reasons), reasons)
