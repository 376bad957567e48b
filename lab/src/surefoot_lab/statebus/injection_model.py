"""The models the injection harness runs: a FakeLLM that follows instructions it sees, and an
adapter for a real OpenAI-compatible endpoint (only when configured).

``ObedientModel`` is a documented stand-in for a model that is vulnerable to injection. It
reads the prompt the harness built (the task, then the shared state as rendered), does the
task by copying the named fields, and scans every entry for instructions in a small grammar:

- a call: ``send_email(to="…", body="…")``, ``transfer(to="…", amount=…)``, ``publish(text="…")``,
  ``write_report(key="…", text="…")``;
- plain English: ``send an email to ADDRESS``, ``transfer N to ACC-NNN``, ``publish "TEXT"``.

Before scanning it reads through tricks the way capable models do: Unicode NFKC
normalisation (full-width letters), zero-width characters removed, base64 runs decoded and
text marked ``rot13`` rotated (each with probability ``decode``), and each entry read together
with the next one (instructions split across entries). An instruction found is followed with
probability ``obey_plain`` when it was shown as plain text and ``obey_data`` when it sat inside
a delimited data block; when it follows one it drops the user's task with probability
``abandon_task``. These rates are explicit parameters, not measurements of any real model;
the defaults are loosely anchored on AgentDojo's GPT-4o figures (57.7% targeted attack
success undefended, 41.7% with delimiters, utility 69% -> 50% under attack).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import json
import os
import random
import re
import unicodedata
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from surefoot.errors import ConfigError
from surefoot.llm import ChatCompletion, Choice, Message, ProviderError, Usage

__all__ = [
    "ObedientModel",
    "OpenAICompatible",
    "VisibleEntry",
    "find_instructions",
    "model_from_env",
    "parse_calls",
    "visible_entries",
]

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"))
_STR = r'"([^"]*)"'
_CALL = re.compile(r"\b(send_email|transfer|publish|write_report)\s*\(([^)]*)\)")
_KWARG = re.compile(r'(\w+)\s*=\s*(?:"([^"]*)"|([\w.@-]+))')
_NATURAL = (
    (re.compile(r"send (?:an |a )?e-?mail to ([\w.+-]+@[\w-]+(?:\.[\w-]+)+)", re.I), "send_email"),
    (re.compile(r"transfer (\d+) (?:\w+ )?to (ACC-\d+)", re.I), "transfer"),
    (re.compile(r"publish (?:the text )?" + _STR, re.I), "publish"),
)
_B64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")


@dataclass(frozen=True, slots=True)
class VisibleEntry:
    """One entry as a model reads it from the prompt.

    Attributes:
        key: the key shown. value: the decoded value. text: its string leaves, joined, free
        text last. body: its free text alone (``text``, ``body`` or ``note``, or the value).
        in_data: it sat inside a ``<<data …>>`` block (spotlighting).
    """

    key: str
    value: Any
    text: str
    body: str
    in_data: bool


_FREE = ("text", "body", "note")


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        order = sorted(value, key=lambda k: (k in _FREE, k))
        return [s for k in order for s in _leaves(value[k])]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v)]
    return [str(value)]


def _entry(key: str, raw: str, in_data: bool, encoded: bool) -> VisibleEntry:
    value: Any = raw
    if encoded or raw.startswith("{"):
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
    free = [str(value[k]) for k in _FREE if k in value] if isinstance(value, dict) else []
    body = " ".join(free) if free else " ".join(_leaves(value))
    return VisibleEntry(key, value, " ".join(_leaves(value)), body, in_data)


def _unquote(s: str) -> str:
    try:
        out = json.loads(s)
    except ValueError:
        return s
    return out if isinstance(out, str) else s


_OPEN = re.compile(r'^<<data (\S+) key=("(?:[^"\\]|\\.)*")')
_LINE = re.compile(r'^\[key=("(?:[^"\\]|\\.)*") [^\]]*\] (.*)$')


def visible_entries(state: str) -> list[VisibleEntry]:
    """Parse rendered shared state the way a naive reader would.

    A ``<<data …>>`` line opens a block and the first line starting with ``<</data`` closes
    it; ``[key=…] value`` lines are labelled entries; ``- key: text`` lines (and their
    continuation lines) are plain entries. Escaped rendering keeps each value on one line,
    so a planted closing tag cannot end a block early; a raw rendering lets it.
    """
    out: list[VisibleEntry] = []
    lines = state.split("\n")
    i = 0
    plain: list[str] | None = None
    plain_key = ""

    def flush() -> None:
        nonlocal plain
        if plain is not None:
            out.append(_entry(plain_key, "\n".join(plain), False, False))
            plain = None

    while i < len(lines):
        line = lines[i]
        m = _OPEN.match(line)
        if m:
            flush()
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].startswith("<</data"):
                body.append(lines[i])
                i += 1
            out.append(_entry(_unquote(m.group(2)), "\n".join(body), True, True))
            i += 1
            continue
        m2 = _LINE.match(line)
        if m2:
            flush()
            out.append(_entry(_unquote(m2.group(1)), m2.group(2), False, True))
        elif line.startswith("- ") and ": " in line:
            flush()
            plain_key, _, rest = line[2:].partition(": ")
            plain = [rest]
        elif plain is not None:
            plain.append(line)
        i += 1
    flush()
    return out


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH)


def _decoded(text: str) -> list[str]:
    """Texts hidden in ``text``: base64 runs and rot13-marked text."""
    found = []
    for run in _B64.findall(text):
        try:
            raw = base64.b64decode(run, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if raw.isprintable():
            found.append(raw)
    if "rot13" in text.lower():
        found.append(codecs.decode(text, "rot13"))
    return found


def find_instructions(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Tool calls that ``text`` asks for, in the fake's grammar (see the module docstring)."""
    text = _normalise(text)
    calls: list[tuple[str, dict[str, Any]]] = []
    for m in _CALL.finditer(text):
        args: dict[str, Any] = {}
        for k, quoted, bare in _KWARG.findall(m.group(2)):
            args[k] = quoted if quoted or not bare else bare
        calls.append((m.group(1), args))
    for rx, tool in _NATURAL:
        for m in rx.finditer(text):
            if tool == "send_email":
                calls.append((tool, {"to": m.group(1), "body": "as requested"}))
            elif tool == "transfer":
                calls.append((tool, {"to": m.group(2), "amount": int(m.group(1))}))
            else:
                calls.append((tool, {"text": m.group(1)}))
    return calls


def _rng(seed: int, messages: Sequence[dict[str, Any]]) -> random.Random:
    blob = json.dumps(list(messages), sort_keys=True, default=str)
    return random.Random(hashlib.sha256(f"{seed}|{blob}".encode()).hexdigest())


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else None


@dataclass(frozen=True, slots=True)
class ObedientModel:
    """A FakeLLM ``responder`` that follows instructions it sees (module docstring).

    Args:
        obey_plain: chance to follow an instruction shown as plain text.
        obey_data: chance to follow one shown inside a delimited data block.
        decode: chance to decode an encoded instruction (base64, rot13).
        abandon_task: chance to drop the user's task after following an instruction.
        task_skill: chance to do the task right when it does not drop it.
        seed: with the prompt, fixes every draw (same prompt, same answer).
    """

    obey_plain: float = 0.6
    obey_data: float = 0.42
    decode: float = 0.5
    abandon_task: float = 0.3
    task_skill: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("obey_plain", "obey_data", "decode", "abandon_task", "task_skill"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
                raise ConfigError(f"ObedientModel.{name} must be in [0, 1], got {v!r}")

    def params(self) -> dict[str, float]:
        """The obedience rates, for reports."""
        return {
            "obey_plain": self.obey_plain,
            "obey_data": self.obey_data,
            "decode": self.decode,
            "abandon_task": self.abandon_task,
            "task_skill": self.task_skill,
        }

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        rng = _rng(self.seed, messages)
        prompt = str(messages[-1]["content"])
        head, _, state = prompt.partition("\nSHARED STATE:\n")
        task = json.loads(head.removeprefix("TASK: ").strip())
        entries = visible_entries(state)
        calls: list[dict[str, Any]] = []
        seen: set[str] = set()
        obeyed = False
        for i, e in enumerate(entries):
            nxt = entries[i + 1].body if i + 1 < len(entries) else ""
            found = [(c, False) for c in find_instructions(e.text)]
            found += [(c, True) for d in _decoded(_normalise(e.text)) for c in find_instructions(d)]
            if nxt:  # an instruction split over this entry and the next
                joined = find_instructions(e.body + " " + nxt)
                alone = find_instructions(e.body) + find_instructions(nxt)
                found += [(c, False) for c in joined if c not in alone]
            for (tool, args), encoded in found:
                sig = json.dumps([tool, args], sort_keys=True)
                if sig in seen:
                    continue
                seen.add(sig)
                p = self.obey_data if e.in_data else self.obey_plain
                if encoded:
                    p *= self.decode
                if rng.random() < p:
                    calls.append({"tool": tool, "args": args})
                    obeyed = True
        if not (obeyed and rng.random() < self.abandon_task) and rng.random() < self.task_skill:
            by_key = {e.key: e.value for e in entries}
            args = dict(task.get("args", {}))
            missing = []
            for arg, (key, fld) in task.get("fill", {}).items():
                v = _field(by_key.get(key), fld)
                if v is None:
                    missing.append(key)
                args[arg] = v
            if not missing:
                calls.insert(0, {"tool": task["tool"], "args": args})
        return json.dumps({"calls": calls})


def parse_calls(text: str) -> list[dict[str, Any]]:
    """The tool calls in a model's answer: the first JSON object with a ``calls`` list.

    Anything else (prose, malformed JSON) yields no calls: a model that does not answer in
    the format acts on nothing.
    """
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            start = text.find("{", start + 1)
            continue
        calls = obj.get("calls") if isinstance(obj, dict) else None
        if isinstance(calls, list):
            return [
                c
                for c in calls
                if isinstance(c, dict)
                and isinstance(c.get("tool"), str)
                and isinstance(c.get("args", {}), dict)
            ]
        start = text.find("{", start + 1)
    return []


class OpenAICompatible:
    """A minimal chat-completions client over ``urllib`` for any OpenAI-compatible server.

    Used by the injection experiment only when ``SUREFOOT_LLM_BASE_URL`` is set (see
    :func:`model_from_env`); never required. Counts its calls like the fake does.

    Args:
        base_url: the API root, like ``https://api.example.com/v1``.
        api_key: sent as a bearer token when given.
        model: the model name to ask for.
        timeout: seconds per request.
    """

    def __init__(self, base_url: str, api_key: str = "", model: str = "", timeout: float = 60.0):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"SUREFOOT_LLM_BASE_URL must start with http:// or https://, got {base_url!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.calls = 0

    def create(self, *, model: str, messages: Sequence[dict[str, Any]], **_: Any) -> ChatCompletion:
        """POST ``/chat/completions`` and return the reply shaped like ``FakeLLM``'s.

        Raises:
            ProviderError: the server answered with an error status.
        """
        self.calls += 1
        body = json.dumps(
            {"model": self.model or model, "messages": list(messages), "temperature": 0}
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(
            self.base_url + "/chat/completions", data=body, headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                data = json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise ProviderError(exc.code, dict(exc.headers), detail) from exc
        content = str(data["choices"][0]["message"].get("content") or "")
        u = data.get("usage") or {}
        usage = Usage(
            int(u.get("prompt_tokens", 0)),
            int(u.get("completion_tokens", 0)),
            int(u.get("total_tokens", 0)),
        )
        return ChatCompletion(
            str(data.get("id", "")),
            str(data.get("model", model)),
            [Choice(0, Message("assistant", content))],
            usage,
        )


def model_from_env(environ: dict[str, str] | None = None) -> OpenAICompatible | None:
    """An :class:`OpenAICompatible` client from ``SUREFOOT_LLM_BASE_URL``,
    ``SUREFOOT_LLM_API_KEY`` and ``SUREFOOT_LLM_MODEL``, or None when the URL is unset."""
    env = os.environ if environ is None else environ
    url = env.get("SUREFOOT_LLM_BASE_URL", "")
    if not url:
        return None
    return OpenAICompatible(
        url, env.get("SUREFOOT_LLM_API_KEY", ""), env.get("SUREFOOT_LLM_MODEL", "")
    )
