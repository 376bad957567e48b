"""A streamed OpenAI Agents SDK run on surefoot, for the real-process SIGKILL test.

``python openai_agents_stream_app.py DB RUN_ID`` runs (or resumes) the run and prints its answer.
The model is a deterministic stand-in (no network) that streams ``PIECES`` as text deltas
and appends a line to the ledger named by ``AGENTS_LEDGER`` per piece it sends
(``piece <n>``); with ``AGENTS_PAUSE=stream`` it sleeps after the second piece so a test can
SIGKILL the process in the middle of the model's stream.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from agents import Agent, Model
from agents.testing.model import assistant_message
from openai.types.responses import Response, ResponseCompletedEvent, ResponseTextDeltaEvent

from surefoot import durable
from surefoot.integrations.openai_agents import DurableRunner

LEDGER = Path(os.environ.get("AGENTS_LEDGER", "ledger.txt"))
PAUSE = os.environ.get("AGENTS_PAUSE", "")
PIECES = ["Refunds ", "take ", "five ", "working ", "days."]


def _note(line: str) -> None:
    with LEDGER.open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


class StreamingModel(Model):
    """Streams PIECES, then completes with a message holding their concatenation."""

    async def get_response(self, *a: Any, **k: Any) -> Any:
        raise NotImplementedError("this model only streams")

    async def stream_response(self, *a: Any, **k: Any) -> Any:
        for n, piece in enumerate(PIECES):
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="msg",
                output_index=0,
                content_index=0,
                delta=piece,
                logprobs=[],
                sequence_number=n,
            )
            _note(f"piece {n}")
            if n == 1 and PAUSE == "stream":
                _note("paused stream")
                await asyncio.sleep(60)
        done = Response(
            id="resp-1",
            created_at=0,
            model="stand-in",
            object="response",
            output=[assistant_message("".join(PIECES))],
            tool_choice="none",
            tools=[],
            top_p=None,
            parallel_tool_calls=False,
            status="completed",
        )
        yield ResponseCompletedEvent(type="response.completed", response=done, sequence_number=9)


app = durable.App(lease=2.0)  # a killed holder's run moves within 2 s
runner = DurableRunner(app)
agent = Agent(name="support", instructions="Help.", model=StreamingModel())


@app.workflow
async def support(question: str) -> str:
    result = await runner.run(agent, question, stream=True)
    return str(result.final_output)


if __name__ == "__main__":
    app.configure(url=sys.argv[1])
    handle = app.start(support, "how long do refunds take?", run_id=sys.argv[2])
    print(handle.result(timeout=60))
    app.close()
