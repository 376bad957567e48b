"""A durable run of three model calls through surefoot.llm, for the kill-and-resume test.

Run as a script: ``python llm_resume_app.py DB_URL PROVIDER_URL``; prints the run's result
as JSON. The same worker id each time, so a rerun takes the killed run back at once.
"""

from __future__ import annotations

import json
import sys

from surefoot import durable, llm
from surefoot.resilience import Backoff, RetryPolicy

app = durable.App(sys.argv[1], worker_id="llm-resume-worker", lease=30.0, poll=0.05)
client = llm.connect(
    "openai",
    "served-model",
    api_key="test-key",
    base_url=sys.argv[2],
    policy=RetryPolicy(max_attempts=3, backoff=Backoff(0.05, 0.2, "none")),
)


@app.step
def ask(question: str) -> dict[str, object]:
    """One model call; its reply (text and tokens) is journalled, never asked again."""
    r = client.create(messages=[{"role": "user", "content": question}])
    return {"text": r.text, "tokens": r.usage.total_tokens}


@app.workflow
def research() -> list[dict[str, object]]:
    return [ask(f"question {i}") for i in (1, 2, 3)]


if __name__ == "__main__":
    print(json.dumps(app.start(research, run_id="llm-run-1").result(timeout=60)), flush=True)
    app.close()
