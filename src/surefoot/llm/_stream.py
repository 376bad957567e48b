"""Streamed replies: the text piece by piece, then the whole ``ChatCompletion``.

A stream knows nothing of the client that opened it: it is handed two callbacks, one that
turns the finished text into the priced reply and one that records a stream cut short.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

from ._fake import ChatCompletion, Usage

__all__ = ["AsyncReplyStream", "Delta", "Finished", "Interrupted", "ReplyStream"]


@dataclass(frozen=True, slots=True)
class Delta:
    """One streamed event, normalised: text, and/or usage, and/or the end of the reply."""

    text: str = ""
    usage: Usage | None = None
    finish_reason: str | None = None
    model: str | None = None
    id: str | None = None


Finished = Callable[[list[str], Delta], ChatCompletion]
"""Called once a stream ended with a finish reason: the text's parts and the last event
merged (usage, finish reason, model, id) -> the whole reply, priced and counted."""
Interrupted = Callable[[list[str], BaseException], None]
"""Called when a stream failed after its first event: the text so far and the error, which
is raised on as it came."""


class ReplyStream:
    """The text of a streamed reply, piece by piece; ``reply`` once it is exhausted.

    Args:
        events: the rest of the stream. head: the events already read (up to the first text).
        finished / interrupted: what the opening client does with the end of the stream.
        on_text: called with each text piece before it is yielded (the client's
            ``on_text``, ``durable.emit`` for a durable token stream).

    Attributes:
        text: the text so far. reply: the whole ``ChatCompletion`` (None until the end).
    """

    def __init__(
        self,
        events: Iterator[Delta],
        head: list[Delta],
        *,
        finished: Finished,
        interrupted: Interrupted,
        on_text: Callable[[str], object] | None = None,
    ) -> None:
        self._finished = finished
        self._interrupted = interrupted
        self._on_text = on_text
        self._gen = self._run(events, head)
        self.parts: list[str] = []
        self.reply: ChatCompletion | None = None

    @property
    def text(self) -> str:
        """The text received so far."""
        return "".join(self.parts)

    def _run(self, events: Iterator[Delta], head: list[Delta]) -> Iterator[str]:
        last = Delta()
        finished = False
        try:
            for d in _chain(head, events):
                last = _merge(last, d)
                finished = finished or d.finish_reason is not None
                if d.text:
                    self.parts.append(d.text)
                    if self._on_text is not None:
                        self._on_text(d.text)
                    yield d.text
            if not finished:
                raise ConnectionResetError(
                    "the stream ended before the reply was complete (no finish reason)"
                )
        except Exception as exc:
            self._interrupted(self.parts, exc)
            raise
        self.reply = self._finished(self.parts, last)

    def __iter__(self) -> Iterator[str]:
        return self._gen

    def __next__(self) -> str:
        return next(self._gen)

    def read(self) -> ChatCompletion:
        """Consume the rest and return the whole reply."""
        for _ in self._gen:
            pass
        assert self.reply is not None
        return self.reply


class AsyncReplyStream:
    """The async twin of ``ReplyStream``: ``async for piece in stream``; ``await read()``."""

    def __init__(
        self,
        events: AsyncIterator[Delta],
        head: list[Delta],
        *,
        finished: Finished,
        interrupted: Interrupted,
        on_text: Callable[[str], object] | None = None,
    ) -> None:
        self._finished = finished
        self._interrupted = interrupted
        self._on_text = on_text
        self._gen = self._run(events, head)
        self.parts: list[str] = []
        self.reply: ChatCompletion | None = None

    @property
    def text(self) -> str:
        """The text received so far."""
        return "".join(self.parts)

    async def _run(self, events: AsyncIterator[Delta], head: list[Delta]) -> AsyncIterator[str]:
        last = Delta()
        finished = False
        try:
            for d in head:
                last = _merge(last, d)
                finished = finished or d.finish_reason is not None
                if d.text:
                    self.parts.append(d.text)
                    if self._on_text is not None:
                        self._on_text(d.text)
                    yield d.text
            async for d in events:
                last = _merge(last, d)
                finished = finished or d.finish_reason is not None
                if d.text:
                    self.parts.append(d.text)
                    if self._on_text is not None:
                        self._on_text(d.text)
                    yield d.text
            if not finished:
                raise ConnectionResetError(
                    "the stream ended before the reply was complete (no finish reason)"
                )
        except Exception as exc:
            self._interrupted(self.parts, exc)
            raise
        self.reply = self._finished(self.parts, last)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._gen

    async def __anext__(self) -> str:
        return await self._gen.__anext__()

    async def read(self) -> ChatCompletion:
        """Consume the rest and return the whole reply."""
        async for _ in self._gen:
            pass
        assert self.reply is not None
        return self.reply


def _chain(head: list[Delta], rest: Iterator[Delta]) -> Iterator[Delta]:
    yield from head
    yield from rest


def _merge(last: Delta, d: Delta) -> Delta:
    return Delta(
        text="",
        usage=d.usage if d.usage is not None else last.usage,
        finish_reason=d.finish_reason or last.finish_reason,
        model=d.model or last.model,
        id=d.id or last.id,
    )
