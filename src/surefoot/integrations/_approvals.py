"""Deferred tool calls as surefoot signals, each bound to the exact call it answers.

A tool call an agent cannot make by itself waits, holding no worker, for one of two
answers:

- an **approval** (a person decides whether the call runs): the call waits for the signal
  ``approve:<digest>`` and ``approve(app, run_id, digest, by=…)`` sends it;
- an **external result** (the call is made elsewhere, and its result handed back): the call
  waits for ``result:<digest>`` and ``deliver(app, run_id, digest, value, by=…)`` sends it.

The digest (``call_digest``) hashes the agent run, the model's tool call id, the tool and its
arguments, so an answer names one call with those exact arguments and releases no other:
``approve`` and ``deliver`` refuse a digest that no call of the run asked about, send nothing,
and write each answer to the run's audit log (who, the tool, the call, the decision). A call
is answered once; the first answer stands. Every request is journalled (``approval.request``)
before the first wait, so ``pending_approvals`` / ``pending_results`` list them all at once.

A listing shows each call as an ``ApprovalRequest`` (tool, arguments, call id, digest), its
arguments redacted as surefoot's logs redact (``shown_args``): whoever reads the list of
waiting calls sees no password or API key the model put in them, while the digest still binds
the real arguments. The OpenAI Agents integration lists its waiting calls the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..durable import App, current_run
from ..errors import ConfigError
from ..telemetry import redact_value
from ._operations import OperationSteps, call_digest

__all__ = [
    "REQUEST_STEP",
    "ApprovalRequest",
    "Decision",
    "ExternalResult",
    "approve",
    "await_answers",
    "deliver",
    "pending_approvals",
    "pending_results",
    "shown_args",
]

REQUEST_STEP = "approval.request"
"""The pure step that journals what a waiting call asks, before its wait (kept for both kinds:
a persisted name)."""

_PREFIX = {"approval": "approve:", "external": "result:"}
_AUDIT = {"approval": ("approval", "denial"), "external": ("external_result",)}


def shown_args(args: Any) -> Any:
    """A call's arguments as a listing shows them: a value under a secret-looking name
    (``password``, ``api_key``, ``token`` …) is ``[redacted]``, and secrets inside text (an
    ``sk-…`` key, ``token=…``) are masked, as in surefoot's logs. A JSON text is decoded
    first; the digest is always computed from the arguments as the model sent them."""
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            pass  # shown as the text it is, redacted
    return redact_value(args)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A tool call that waits for an answer.

    Attributes:
        tool_call_id: the model's id for the call. tool: the tool's name. args: the
            arguments the call runs with, redacted for display (``shown_args``). digest:
            the digest of the real arguments (what an answer must name). signal: the
            signal it waits for. kind: ``approval`` (a person decides) or ``external``
            (its result is made elsewhere and delivered).
    """

    tool_call_id: str
    tool: str
    args: Any
    digest: str
    signal: str
    kind: str = "approval"


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's answer to one approval request.

    Attributes:
        digest: the call it answers. approved: run it (True) or not. by: who decided.
        reason: why, if they said (a denied call's reason is what the model is told).
    """

    digest: str
    approved: bool
    by: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ExternalResult:
    """The result of a call made elsewhere.

    Attributes:
        digest: the call it answers. value: its result (JSON). by: who delivered it.
    """

    digest: str
    value: Any
    by: str


async def await_answers(
    app: App,
    steps: OperationSteps,
    calls: list[tuple[str, str, str, Any]],
    *,
    agent_run_id: str | None = None,
) -> list[Decision | ExternalResult]:
    """In workflow code: journal every call's request, then wait (holding no worker) for
    each call's own answer, in the order given; the answers, in that order.

    ``calls`` are ``(kind, tool_call_id, tool, args)``, kind ``approval`` or ``external``;
    ``agent_run_id`` names the agent run they belong to when a workflow holds several
    (default: the surefoot run). An answer reaches only the call whose digest it names.
    """
    run_id = agent_run_id or current_run().run_id
    requests = []
    for kind, tool_call_id, tool, args in calls:
        digest = call_digest(run_id, tool_call_id, tool, args)
        req = ApprovalRequest(tool_call_id, tool, args, digest, _PREFIX[kind] + digest, kind)
        await steps.journal_record(
            REQUEST_STEP,
            {
                "tool_call_id": tool_call_id,
                "tool": tool,
                "args": args,
                "digest": digest,
                "signal": req.signal,
                "kind": kind,
            },
        )
        requests.append(req)
    out: list[Decision | ExternalResult] = []
    for req in requests:
        if req.kind == "approval":
            got = await app.wait_for(req.signal, type=Decision)
            if not isinstance(got, Decision) or got.digest != req.digest:
                got = Decision(req.digest, False, "surefoot", "the answer named another call")
            out.append(got)
        else:
            res = await app.wait_for(req.signal, type=ExternalResult)
            out.append(res)
    return out


def _requests(app: App, run_id: str, kind: str) -> tuple[list[ApprovalRequest], set[str], Any]:
    detail = app.show(run_id)
    answered = {s.name[len("signal:") :] for s in detail.steps if s.status == "done"}
    for a in detail.audit:  # answered, the answer not yet taken by the run
        d = a.detail
        if a.action in _AUDIT[kind] and isinstance(d, dict) and isinstance(d.get("digest"), str):
            answered.add(_PREFIX[kind] + d["digest"])
    out = []
    for s in detail.steps:
        r = s.result
        if s.name != REQUEST_STEP or not isinstance(r, dict) or r.get("kind", "approval") != kind:
            continue
        args = shown_args(r["args"])
        out.append(
            ApprovalRequest(r["tool_call_id"], r["tool"], args, r["digest"], r["signal"], kind)
        )
    return out, answered, detail


def pending_approvals(app: App, run_id: str) -> list[ApprovalRequest]:
    """The calls of ``run_id`` waiting for a person's decision, in the order they asked (a
    call decided whose run has not taken the decision yet is not listed).

    Raises:
        UnknownRunError: no such run.
    """
    asked, answered, _ = _requests(app, run_id, "approval")
    return [r for r in asked if r.signal not in answered]


def pending_results(app: App, run_id: str) -> list[ApprovalRequest]:
    """The calls of ``run_id`` waiting for a result made elsewhere (``deliver``)."""
    asked, answered, _ = _requests(app, run_id, "external")
    return [r for r in asked if r.signal not in answered]


def _answer(
    app: App, run_id: str, kind: str, digest: str, by: str, payload: Any, detail: dict[str, Any]
) -> bool:
    if not isinstance(by, str) or not by.strip():
        raise ConfigError(
            f"{'approve' if kind == 'approval' else 'deliver'}() needs by= naming "
            "who answered (it goes to the audit log)"
        )
    asked, _, _ = _requests(app, run_id, kind)
    call = next((r for r in asked if r.digest == digest), None)
    if call is None:
        lister = "pending_approvals" if kind == "approval" else "pending_results"
        raise ConfigError(
            f"run {run_id!r} has no tool call waiting for "
            f"{'approval' if kind == 'approval' else 'a result'} under digest {digest!r}; "
            f"list the waiting calls with {lister}(app, run_id) and pass one's digest"
        )
    sent = app.signal(run_id, call.signal, payload, signal_id=f"{kind}:{digest}")
    if sent:
        action = _AUDIT[kind][0]
        if kind == "approval" and not detail.get("approved"):
            action = _AUDIT[kind][1]
        entry = {"digest": digest, "tool": call.tool, "tool_call_id": call.tool_call_id, **detail}
        app.journal.audit(
            run_id,
            actor=by,
            action=action,
            detail=json.dumps(entry, sort_keys=True),
            now=app.clock.now(),
        )
    return sent


def approve(
    app: App,
    run_id: str,
    digest: str,
    *,
    by: str,
    approved: bool = True,
    reason: str | None = None,
) -> bool:
    """Decide the call of ``run_id`` bound to ``digest``; the decision goes to the audit log
    (``approval`` or ``denial``, with who, the tool, the call id and the reason).

    Returns:
        True if the decision was delivered; False if this call was decided before (the
        first decision stands; nothing changed).

    Raises:
        ConfigError: no call of the run asked for approval under ``digest`` (a decision is
            never sent to a call it was not made for), or ``by`` is empty.
        UnknownRunError: no such run.
    """
    payload = Decision(digest, bool(approved), by, reason)
    return _answer(
        app,
        run_id,
        "approval",
        digest,
        by,
        payload,
        {"approved": bool(approved), "reason": reason},
    )


def deliver(app: App, run_id: str, digest: str, value: Any, *, by: str) -> bool:
    """Hand the call of ``run_id`` bound to ``digest`` the result it waits for (made
    elsewhere); recorded in the audit log as ``external_result``.

    Returns:
        True if delivered; False if this call had its result before (the first stands).

    Raises:
        ConfigError: no call of the run waits for a result under ``digest``, or ``by`` is
            empty.
        EncodeError: ``value`` is not JSON.
    """
    return _answer(app, run_id, "external", digest, by, ExternalResult(digest, value, by), {})
