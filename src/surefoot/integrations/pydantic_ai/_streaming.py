"""A PydanticAI agent's text, streamed to the surefoot run's token stream as it arrives.

With an event stream handler, ``SurefootDurability`` makes every model request stream inside
its journalled step ``<agent>__model.request_stream``, and PydanticAI hands the model's live
events to the handler *inside* that step. ``emit_text(handler)`` is such a handler: it passes
each text delta to ``durable.emit`` (readers follow it with ``handle.stream()``, ``surefoot
runs follow`` or SSE), then the event on to ``handler``. A request replayed from the journal
calls no handler, so it emits nothing again; one resumed after a crash streams again behind a
``retry`` marker, and its final text is the journalled response's.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

from ... import durable

__all__ = ["emit_text", "event_text"]


def event_text(event: Any) -> str:
    """The text an agent stream event adds to the response ("" for any other event)."""
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta
    return ""


def emit_text(handler: EventStreamHandler[Any] | None = None) -> EventStreamHandler[Any]:
    """An event stream handler that emits each text delta to the run's token stream, then
    passes every event on to ``handler`` (if given).

    ``SurefootDurability(app, event_stream_handler=emit_text())``, or
    ``emit_text(your_handler)`` to keep yours. Your handler should read every event it is
    given: a text delta is emitted when your handler reads it.
    """

    async def handle(ctx: Any, events: AsyncIterable[Any]) -> None:
        async def emitting() -> AsyncIterator[Any]:
            async for event in events:
                text = event_text(event)
                if text:
                    durable.emit(text)
                yield event

        if handler is None:
            async for _ in emitting():
                pass
        else:
            await handler(ctx, emitting())

    return handle
