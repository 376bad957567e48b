"""``on_text``: a provider adapter's ``stream()`` hands every text piece to a callback as it
arrives; with ``durable.emit`` a durable step that streams publishes its tokens."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from surefoot.durable import App, emit, step_texts
from surefoot.errors import ConfigError
from surefoot.llm import ChatClient
from surefoot.testing import FakeProvider, StreamError

Make = Callable[..., ChatClient]
MSGS = [{"role": "user", "content": "tell me about durable streams please"}]


def test_on_text_gets_every_piece_before_it_is_handed_out(make: Make) -> None:
    seen: list[str] = []
    s = make(on_text=seen.append).stream(messages=MSGS)
    pieces = []
    for piece in s:
        assert seen[-1] == piece  # called before the piece was yielded
        pieces.append(piece)
    assert seen == pieces and len(pieces) > 1


def test_on_text_async(make: Make) -> None:
    seen: list[str] = []

    c = make(on_text=seen.append)

    async def main() -> str:
        s = await c.astream(messages=MSGS)
        text = (await s.read()).text
        await c.aclose()  # type: ignore[attr-defined]
        return text

    text = asyncio.run(main())
    assert "".join(seen) == text


def test_on_text_must_be_callable(make: Make) -> None:
    with pytest.raises(ConfigError, match="on_text must be a callable"):
        make(on_text="print")


def test_a_durable_step_streaming_a_model_call_publishes_its_tokens(
    make: Make, fp: FakeProvider, tmp_path: Path
) -> None:
    """The first attempt is cut after 2 pieces (after content: the client does not retry
    it, the step does); its pieces, then a retry marker, then the whole reply's pieces."""
    client = make(on_text=emit)
    fp.script(StreamError(after=2))
    with App(f"sqlite:///{tmp_path / 'runs.db'}", poll=0.01) as app:

        @app.step(retry=2)
        def ask(question: str) -> str:
            return client.stream(messages=[{"role": "user", "content": question}]).read().text

        @app.workflow
        def wf(question: str) -> str:
            return ask(question)

        h = app.start(wf, MSGS[0]["content"], run_id="r1")
        answer = h.result(timeout=10)
        events = list(h.stream())
    kinds = [e.kind for e in events]
    assert kinds[:3] == ["start", "token", "token"] and "retry" in kinds
    assert step_texts(events) == {"1": answer}
    assert fp.count() == 2
