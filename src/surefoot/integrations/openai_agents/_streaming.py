"""A model turn that streams, inside the journalled step ``openai_agents.model``.

The step calls the wrapped model's own ``stream_response``, hands every text delta
(``response.output_text.delta``) to ``durable.emit`` as it arrives (so readers follow it with
``handle.stream()``, ``surefoot runs follow`` or SSE, with a ``retry`` marker before a new
attempt's tokens), and journals the turn's ``ModelResponse``, built from the stream's
``response.completed`` event, in the same JSON as a turn that did not stream. A replayed turn
reads the journal and emits nothing again.

For ``Runner.run_streamed`` the step's events are also forwarded, live, to the SDK's own
stream (``result.stream_events()``); the turn's ``response.completed`` event is rebuilt from
the journalled response, so a live turn and a replayed one end the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ... import durable

TEXT_DELTA = "response.output_text.delta"
COMPLETED = "response.completed"
FAILED = ("response.incomplete", "response.failed", "error", "response.error")


class StreamedTurnError(RuntimeError):
    """The model's stream ended without a response (or reported a failure): the step fails,
    and surefoot's retry policy decides whether it runs again."""


def streamed_call(
    inner: Any,
    args: Any,
    kwargs: Any,
    dump: Callable[[Any], dict[str, Any]],
    forward: Callable[[Any], None] | None = None,
) -> Callable[[], Awaitable[dict[str, Any]]]:
    """The body of one streamed model step: stream, emit each text delta, return the
    journalled form of the turn's ``ModelResponse``."""

    async def call() -> dict[str, Any]:
        final = None
        async for event in inner.stream_response(*args, **kwargs):
            kind = getattr(event, "type", None)
            if kind == TEXT_DELTA:
                if event.delta:
                    durable.emit(str(event.delta))
            elif kind == COMPLETED:
                final = event.response
                continue  # rebuilt from the journal for the SDK: live and replay end alike
            elif kind in FAILED:
                raise StreamedTurnError(f"the model's stream reported {kind!r}")
            if forward is not None:
                forward(event)
        if final is None:
            raise StreamedTurnError("the model's stream ended without response.completed")
        return dump(model_response(final))

    return call


async def forward_step(
    step: Callable[[Callable[[], Awaitable[dict[str, Any]]]], Awaitable[dict[str, Any]]],
    make_call: Callable[[Callable[[Any], None]], Callable[[], Awaitable[dict[str, Any]]]],
) -> AsyncIterator[Any]:
    """Run the step in a task and yield what it forwards while it runs; the last item is the
    step's journalled data (a dict), which the caller turns into ``response.completed``."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    task = asyncio.ensure_future(step(make_call(queue.put_nowait)))
    try:
        while True:
            while not queue.empty():
                yield queue.get_nowait()
            if task.done():
                break
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        yield task.result()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def model_response(response: Any) -> Any:
    """The SDK's ``ModelResponse`` of a completed ``Response`` (output, usage, id)."""
    from agents.items import ModelResponse
    from agents.usage import Usage

    raw = response.usage
    usage = Usage(requests=1)
    if raw is not None:
        usage = Usage(
            requests=1,
            input_tokens=raw.input_tokens,
            output_tokens=raw.output_tokens,
            total_tokens=raw.total_tokens,
            input_tokens_details=raw.input_tokens_details,
            output_tokens_details=raw.output_tokens_details,
        )
    return ModelResponse(output=list(response.output), usage=usage, response_id=response.id)


def completed_event(response: Any) -> Any:
    """A ``response.completed`` event carrying a journalled ``ModelResponse``."""
    from openai.types.responses import Response, ResponseCompletedEvent, ResponseUsage

    u = response.usage
    usage = ResponseUsage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.total_tokens,
        input_tokens_details=u.input_tokens_details,
        output_tokens_details=u.output_tokens_details,
    )
    done = Response.model_construct(
        id=response.response_id,
        created_at=0,
        model="",
        object="response",
        output=list(response.output),
        tool_choice="auto",
        tools=[],
        top_p=None,
        parallel_tool_calls=False,
        status="completed",
        usage=usage,
    )
    return ResponseCompletedEvent(type="response.completed", response=done, sequence_number=0)
