"""A durable run of three streamed model calls whose tokens go to the run's token stream,
for the kill-and-resume test of durable token streams.

Run as a script: ``python stream_crash_app.py DB_URL PROVIDER_URL``; prints the run's
result as JSON. ``SF_HOLD_AFTER=2`` makes step 2 wait a minute after its model stream ended
and before it returns (the test kills it there: the stream is complete, the step is not
journalled). The same worker id each time, so a rerun takes the killed run back at once
(``SF_WORKER_ID`` and ``SF_LEASE`` change the id and the lease, for a takeover test).
"""

from __future__ import annotations

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


@app.step
def ask(i: int) -> str:
    """One streamed model call; its text is journalled, and streamed while it comes."""
    text = client.stream(messages=[{"role": "user", "content": f"question {i}"}]).read().text
    if str(i) == HOLD:
        time.sleep(60)  # killed here: the stream is complete, the step is not journalled
    return text


@app.workflow
def research() -> list[str]:
    return [ask(i) for i in (1, 2, 3)]


if __name__ == "__main__":
    print(json.dumps(app.start(research, run_id="stream-run-1").result(timeout=120)), flush=True)
    app.close()
