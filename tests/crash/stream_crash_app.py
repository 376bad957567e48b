"""A durable run of three streamed model calls whose tokens go to the run's token stream,
for the kill-and-resume test of durable token streams.

Run as a script: ``python stream_crash_app.py DB_URL PROVIDER_URL``; prints the run's
result as JSON. ``SF_HOLD_AFTER=2`` makes step 2 wait a minute after its model stream ended
and before it returns (the test kills it there: the stream is complete, the step is not
journalled). The same worker id each time, so a rerun takes the killed run back at once
(``SF_WORKER_ID`` and ``SF_LEASE`` change the id and the lease, for a takeover test;
``SF_ASYNC=1`` makes the step and the workflow async, streaming with ``astream``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from surefoot import durable, llm
from surefoot.resilience import Backoff, RetryPolicy

app = durable.App(
    sys.argv[1],
    worker_id=os.environ.get("SF_WORKER_ID", "stream-crash-worker"),
    lease=float(os.environ.get("SF_LEASE", "30")),
    poll=0.02,
)
client = llm.connect(
    "openai",
    "served-model",
    api_key="test-key",
    base_url=sys.argv[2],
    policy=RetryPolicy(max_attempts=3, backoff=Backoff(0.05, 0.2, "none")),
    on_text=durable.emit,  # a step that streams publishes its tokens
)
HOLD = os.environ.get("SF_HOLD_AFTER")


if os.environ.get("SF_ASYNC") != "1":

    @app.step
    def ask(i: int) -> str:
        """One streamed model call; its text is journalled, and streamed while it comes."""
        msgs = [{"role": "user", "content": f"question {i}"}]
        text = client.stream(messages=msgs).read().text
        if str(i) == HOLD:
            time.sleep(60)  # killed here: the stream is complete, the step is not journalled
        return text

    @app.workflow
    def research() -> list[str]:
        return [ask(i) for i in (1, 2, 3)]

else:  # SF_ASYNC=1: the same run with an async step and workflow (astream)

    @app.step(name="ask")
    async def aask(i: int) -> str:
        msgs = [{"role": "user", "content": f"question {i}"}]
        text = (await (await client.astream(messages=msgs)).read()).text
        if str(i) == HOLD:
            await asyncio.sleep(60)
        return text

    @app.workflow(name="research")
    async def aresearch() -> list[str]:
        return [await aask(i) for i in (1, 2, 3)]


if __name__ == "__main__":
    result = app.start("research", run_id="stream-run-1").result(timeout=120)
    print(json.dumps(result), flush=True)
    app.close()
