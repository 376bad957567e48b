"""``DurableRunner``: an OpenAI Agents SDK agent run as one surefoot workflow run.

Inside a surefoot workflow, ``await runner.run(agent, input)`` runs the SDK's own
``Runner.run`` on clones of the agent (and of every agent it hands off to) whose model and
function tools are wrapped:

- every ``Model.get_response`` is the step ``openai_agents.model``: its ``ModelResponse`` is
  journalled as JSON (pydantic's own dump of the SDK's types; never pickle) and read back on
  replay, so a resumed run never asks the model again for a turn it already has. The SDK's
  own retries are off (``ModelSettings.retry`` left unset, the OpenAI client's
  ``max_retries=0`` is the caller's choice); surefoot's ``RetryPolicy`` is the one loop.
- every function tool call is the step ``openai_agents.tool`` (pure) or
  ``openai_agents.effect`` (an effect: an intent row before it runs, so a crash mid-effect is
  seen on resume). A tool declared an effect reads its idempotency key with
  ``idempotency_key()``: ``f"{run_id}:{call_id}"``, the model's own ``call_id``, the same on
  every resume. Parallel calls get their positions in the order the model listed them: a
  turnstile by ``call_id`` starts each call's step only after the previous one's began.
- a tool that needs approval waits, before it runs, for the signal ``approve:<digest>`` where
  the digest covers the tool's name, its arguments and the call id: the run sleeps holding no
  worker, and an approval names exactly one call. ``pending_approvals`` lists the calls a run
  waits for (tool, arguments redacted as the logs redact them, call id, digest: read from the
  journalled model turn that asked for them, so nothing new is journalled); ``approve`` sends a
  decision (in the journal and the audit log as any signal).

Handoffs stay inside the one durable run: the agents handed to are wrapped the same way.

Streaming (``runner.run(..., stream=True)`` or ``runner.run_streamed``): the step
``openai_agents.model`` calls the model's ``stream_response`` and hands each text delta to
``durable.emit`` as it arrives (see ``_streaming``); what is journalled is the same
``ModelResponse``, so replay emits nothing again.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ... import durable
from ...errors import ConfigError
from .._approvals import ApprovalRequest, shown_args
from ._streaming import completed_event, forward_step, streamed_call

__all__ = [
    "APPROVAL_PREFIX",
    "OPERATION_NAMES",
    "Approval",
    "DurableRunner",
    "approval_digest",
    "approve",
    "idempotency_key",
    "pending_approvals",
]

# The journalled step names. A run in flight replays by these names: changing one strands
# in-flight runs (tests/unit/integrations/test_openai_agents_names.py pins them).
MODEL_STEP = "openai_agents.model"
TOOL_STEP = "openai_agents.tool"
EFFECT_STEP = "openai_agents.effect"
OPERATION_NAMES = (MODEL_STEP, TOOL_STEP, EFFECT_STEP)
APPROVAL_PREFIX = "approve:"

_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "surefoot_openai_agents_key", default=None
)


def idempotency_key() -> str:
    """The idempotency key of the tool call executing now: ``f"{run_id}:{call_id}"``.

    The same on every resume of the run, so a service that deduplicates on it applies the
    effect once. Raises ConfigError outside a tool call run by ``DurableRunner``.
    """
    key = _key.get()
    if key is None:
        raise ConfigError(
            "idempotency_key() is called outside a tool call run by DurableRunner: call it "
            "inside a function tool of an agent run with runner.run(...)"
        )
    return key


@dataclasses.dataclass(frozen=True, slots=True)
class Approval:
    """A person's decision on one tool call (the payload of its ``approve:`` signal)."""

    approved: bool
    by: str = ""
    reason: str = ""


def approval_digest(tool: str, arguments: str, call_id: str) -> str:
    """The digest an approval names: the tool, its arguments (as the model sent them, JSON
    normalised) and the call id, so an approval can never release another call."""
    try:
        args = json.dumps(json.loads(arguments or "{}"), sort_keys=True, separators=(",", ":"))
    except ValueError:
        args = arguments
    text = json.dumps([tool, args, call_id], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def pending_approvals(app: durable.App, run_id: str) -> list[ApprovalRequest]:
    """The calls a run waits to have approved now, in the order the model asked for them
    (empty when it waits for none): each with its tool, its arguments (redacted as
    surefoot's logs redact them: ``shown_args``), the model's call id and the digest
    ``approve`` takes. The calls are read from the journalled model turns that asked for
    them.

    Raises:
        UnknownRunError: no such run.
    """
    waiting = app.handle(run_id).info().waiting_for or ""
    digests = {
        n[len(APPROVAL_PREFIX) :] for n in waiting.split(", ") if n.startswith(APPROVAL_PREFIX)
    }
    if not digests:
        return []
    out: list[ApprovalRequest] = []
    for tool, args, call_id in _asked_calls(app, run_id):
        digest = approval_digest(tool, args, call_id)
        if digest in digests and all(r.digest != digest for r in out):
            signal = APPROVAL_PREFIX + digest
            out.append(ApprovalRequest(call_id, tool, shown_args(args), digest, signal))
    seen = {r.digest for r in out}  # a wait whose call no journalled turn shows (not expected)
    out += [ApprovalRequest("", "", None, d, APPROVAL_PREFIX + d) for d in sorted(digests - seen)]
    return out


def _asked_calls(app: durable.App, run_id: str) -> list[tuple[str, str, str]]:
    """(tool, arguments as the model sent them, call id) of every function call in the
    run's journalled model turns, in order."""
    calls = []
    for step in app.show(run_id).steps:
        response = step.result if step.name == MODEL_STEP else None
        output = response.get("output") if isinstance(response, dict) else None
        for item in output if isinstance(output, list) else []:
            if isinstance(item, dict) and item.get("type") == "function_call":
                calls.append(
                    (str(item.get("name")), str(item.get("arguments")), str(item.get("call_id")))
                )
    return calls


def approve(
    app: durable.App,
    run_id: str,
    digest: str,
    *,
    approved: bool = True,
    by: str = "",
    reason: str = "",
) -> bool:
    """Send the decision on the call named by ``digest`` (from ``pending_approvals``).

    Raises ConfigError when the run does not wait for that call now (a mistyped digest, or
    a call already decided): an approval names exactly one call, and is never kept for later;
    and when ``approved`` is not a bool (``"no"`` is truthy) or ``by``/``reason`` not text.
    """
    if not isinstance(approved, bool):
        raise ConfigError(
            f"approve(approved=...) takes True or False, got {approved!r}; nothing was sent"
        )
    for field, value in (("by", by), ("reason", reason)):
        if not isinstance(value, str):
            raise ConfigError(f"approve({field}=...) takes text, got {value!r}; nothing was sent")
    pending = [r.digest for r in pending_approvals(app, run_id)]
    if digest not in pending:
        waits = ", ".join(pending) or "no approval"
        raise ConfigError(
            f"run {run_id!r} does not wait for an approval of call {digest!r} (it waits for "
            f"{waits}); list them with pending_approvals(app, run_id)"
        )
    payload = {"approved": approved, "by": by, "reason": reason}
    return bool(
        app.signal(
            run_id, APPROVAL_PREFIX + digest, payload, signal_id=f"{APPROVAL_PREFIX}{digest}"
        )
    )


def _tool_names(what: str, names: Iterable[str] | None) -> frozenset[str]:
    """``names`` as a set of tool names (None: none); a bare string would be its letters."""
    if names is None:
        return frozenset()
    if isinstance(names, str):
        raise ConfigError(
            f"{what}= takes a list of tool names, got the text {names!r}; pass [{names!r}]"
        )
    out = list(names)
    bad = [n for n in out if not isinstance(n, str)]
    if bad:
        raise ConfigError(f"{what}= takes a list of tool names (text), got {bad[0]!r} in it")
    return frozenset(out)


class DurableRunner:
    """Runs OpenAI Agents SDK agents as durable surefoot runs on ``app``.

    Args:
        app: the surefoot ``App`` whose workflows call ``run``.
        effects: names of function tools that act on the world (sending, paying,
            writing): each call gets an intent row and ``idempotency_key()``.
        approvals: names of function tools that wait for ``approve`` before they run.
        model_retry / tool_retry: ``RetryPolicy`` for model requests and tool calls
            (surefoot's defaults when None).
    """

    def __init__(
        self,
        app: durable.App,
        *,
        effects: Iterable[str] | None = (),
        approvals: Iterable[str] | None = (),
        model_retry: Any = None,
        tool_retry: Any = None,
    ) -> None:
        _sdk()  # the extra is installed, or a clear error now
        self.app = app
        self.effects = _tool_names("effects", effects)
        self.approvals = _tool_names("approvals", approvals)
        self._types = _Types()
        try:
            self._model_step = app.step(name=MODEL_STEP, retry=model_retry)(_model_request)
        except ConfigError as exc:
            if "registered twice" not in str(exc):
                raise
            raise ConfigError(
                "this App has a DurableRunner already (its steps are registered): make one "
                "DurableRunner per App and pass every agent to its run(); effects= and "
                "approvals= name the tools of all of them"
            ) from None
        self._tool_step = app.step(name=TOOL_STEP, retry=tool_retry)(_tool_call)
        self._effect_step = app.step(
            name=EFFECT_STEP, effect=True, idempotent=True, retry=tool_retry
        )(_effect_call)

    async def run(self, agent: Any, input: Any, *, stream: bool = False, **kwargs: Any) -> Any:
        """``agents.Runner.run(agent, input, **kwargs)`` as part of the calling workflow.

        Call it from an async surefoot workflow. Returns the SDK's ``RunResult``. With
        ``stream=True`` every model turn streams inside its step: each text delta goes to the
        run's token stream (``durable.emit``) as it arrives; the journal is the same.
        """
        agents = _sdk()
        durable.current_run()  # outside a run: a clear ConfigError, not a silent plain run
        agent, config = self._prepare(agent, kwargs, stream)
        return await agents.Runner.run(agent, input, run_config=config, **kwargs)

    def run_streamed(self, agent: Any, input: Any, **kwargs: Any) -> Any:
        """``agents.Runner.run_streamed(agent, input, **kwargs)`` as part of the calling
        workflow: returns the SDK's ``RunResultStreaming``; iterate ``stream_events()`` in the
        workflow (the run's turns execute while you do). Each model turn streams inside its
        step, its text deltas go to the run's token stream too, and a replayed turn yields
        only its ``response.completed`` event (rebuilt from the journal).
        """
        agents = _sdk()
        durable.current_run()
        agent, config = self._prepare(agent, kwargs, True)
        return agents.Runner.run_streamed(agent, input, run_config=config, **kwargs)

    def _prepare(self, agent: Any, kwargs: dict[str, Any], stream: bool) -> tuple[Any, Any]:
        config = kwargs.pop("run_config", None) or _sdk().RunConfig()
        provider = _Provider(self, config.model_provider, stream)
        return self._wrap(agent, stream), dataclasses.replace(config, model_provider=provider)

    # -- wrapping -------------------------------------------------------------------------

    def _wrap(self, agent: Any, stream: bool, seen: dict[int, Any] | None = None) -> Any:
        agents = _sdk()
        seen = {} if seen is None else seen
        if id(agent) in seen:
            return seen[id(agent)]
        changes: dict[str, Any] = {}
        if isinstance(agent.model, agents.Model) and not _is_durable(agent.model):
            changes["model"] = _durable_model(self, agent.model, stream)
        changes["tools"] = [self._wrap_tool(t) for t in agent.tools]
        clone = agent.clone(**changes)
        seen[id(agent)] = clone
        handoffs = []
        for h in agent.handoffs:
            if isinstance(h, agents.Agent):
                handoffs.append(self._wrap(h, stream, seen))
            else:
                handoffs.append(self._wrap_handoff(h, stream, seen))
        clone.handoffs = handoffs
        return clone

    def _wrap_handoff(self, handoff: Any, stream: bool, seen: dict[int, Any]) -> Any:
        original = handoff.on_invoke_handoff

        async def invoke(*args: Any, **kwargs: Any) -> Any:
            return self._wrap(await original(*args, **kwargs), stream, seen)

        return dataclasses.replace(handoff, on_invoke_handoff=invoke)

    def _wrap_tool(self, tool: Any) -> Any:
        agents = _sdk()
        if not isinstance(tool, agents.FunctionTool):
            return tool  # hosted tools run at the provider, inside the journalled response
        name = tool.name
        effect = name in self.effects
        needs_approval = name in self.approvals
        invoke = tool.on_invoke_tool

        async def on_invoke(ctx: Any, arguments: str) -> Any:
            call_id = str(ctx.tool_call_id)
            run_id = durable.current_run().run_id
            return await self._call(
                invoke, ctx, arguments, name, call_id, run_id, effect, needs_approval
            )

        return dataclasses.replace(tool, on_invoke_tool=on_invoke)

    async def _call(
        self,
        invoke: Callable[[Any, str], Awaitable[Any]],
        ctx: Any,
        arguments: str,
        name: str,
        call_id: str,
        run_id: str,
        effect: bool,
        needs_approval: bool,
    ) -> Any:
        if needs_approval:
            digest = approval_digest(name, arguments, call_id)
            decision = await self.app.wait_for(APPROVAL_PREFIX + digest, type=Approval)
            if not decision.approved:
                why = f": {decision.reason}" if decision.reason else ""
                return f"The call to {name} was not approved{why}."
        key = f"{run_id}:{call_id}"
        step = self._effect_step if effect else self._tool_step
        text: str = await step(invoke, ctx, arguments, key)
        return json.loads(text)

    async def _respond(self, inner: Any, args: Any, kwargs: Any) -> Any:
        types = self._types

        async def call() -> dict[str, Any]:
            return types.dump(await inner.get_response(*args, **kwargs))

        data = await self._model_step(call)
        return types.load(data)

    async def _respond_streaming(self, inner: Any, args: Any, kwargs: Any) -> Any:
        """A turn of ``run(..., stream=True)``: streamed inside the step, journalled whole."""
        types = self._types
        data = await self._model_step(streamed_call(inner, args, kwargs, types.dump))
        return types.load(data)

    async def _stream(self, inner: Any, args: Any, kwargs: Any) -> Any:
        """A turn of ``run_streamed``: the step's events, live, then ``response.completed``."""
        types = self._types

        def make_call(forward: Callable[[Any], None]) -> Callable[[], Awaitable[Any]]:
            return streamed_call(inner, args, kwargs, types.dump, forward)

        async for item in forward_step(self._model_step, make_call):
            if isinstance(item, dict):  # the step's journalled data: the turn is done
                yield completed_event(types.load(item))
            else:
                yield item


def _is_durable(model: Any) -> bool:
    return bool(_MODEL_CLASS) and isinstance(model, _MODEL_CLASS[0])


class _Provider:
    """The run's model provider: the caller's (or the SDK's default) with models wrapped."""

    def __init__(self, runner: DurableRunner, inner: Any, stream: bool) -> None:
        self.runner = runner
        self.inner = inner
        self.stream = stream

    def get_model(self, model_name: str | None) -> Any:
        return _durable_model(self.runner, self.inner.get_model(model_name), self.stream)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


_MODEL_CLASS: list[type] = []


def _durable_model(runner: DurableRunner, inner: Any, stream: bool) -> Any:
    """A ``Model`` whose ``get_response`` and ``stream_response`` are the journalled step
    ``openai_agents.model`` (``get_response`` streams inside the step when ``stream``)."""
    if not _MODEL_CLASS:
        base = _sdk().Model

        class SurefootDurableModel(base):  # type: ignore[misc, valid-type]
            def __init__(self, runner: DurableRunner, inner: Any, stream: bool) -> None:
                self.runner = runner
                self.inner = inner
                self.stream = stream

            async def get_response(self, *args: Any, **kwargs: Any) -> Any:
                if self.stream:
                    return await self.runner._respond_streaming(self.inner, args, kwargs)
                return await self.runner._respond(self.inner, args, kwargs)

            def stream_response(self, *args: Any, **kwargs: Any) -> Any:
                return self.runner._stream(self.inner, args, kwargs)

        _MODEL_CLASS.append(SurefootDurableModel)
    return _MODEL_CLASS[0](runner, inner, stream)


class _Types:
    """JSON for the SDK's ``ModelResponse`` through pydantic's own adapter."""

    def __init__(self) -> None:
        import pydantic
        from agents.items import ModelResponse

        self.adapter = pydantic.TypeAdapter(ModelResponse)

    def dump(self, response: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.adapter.dump_python(response, mode="json")
        return out

    def load(self, data: dict[str, Any]) -> Any:
        return self.adapter.validate_python(data)


# -- the steps (registered on the app by DurableRunner, by name) ----------------------------


async def _model_request(call: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    return await call()


async def _run_tool(
    invoke: Callable[[Any, str], Awaitable[Any]], ctx: Any, arguments: str, call_key: str
) -> str:
    token = _key.set(call_key)
    try:
        value = await invoke(ctx, arguments)
    finally:
        _key.reset(token)
    return json.dumps(value, default=str)


async def _tool_call(
    invoke: Callable[[Any, str], Awaitable[Any]], ctx: Any, arguments: str, call_key: str
) -> str:
    return await _run_tool(invoke, ctx, arguments, call_key)


async def _effect_call(
    invoke: Callable[[Any, str], Awaitable[Any]], ctx: Any, arguments: str, call_key: str
) -> str:
    return await _run_tool(invoke, ctx, arguments, call_key)


def _sdk() -> Any:
    try:
        import agents
    except ImportError:
        raise ConfigError(
            "the OpenAI Agents SDK is not installed: pip install 'surefoot[openai-agents]'"
        ) from None
    return agents
