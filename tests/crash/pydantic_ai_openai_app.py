"""A PydanticAI agent on surefoot whose model is reached through the real OpenAI SDK, for
the kill-and-resume test over surefoot's FakeProvider (tests/crash/test_pydantic_ai_kill.py).

Run as a script: ``python pydantic_ai_openai_app.py DB_URL PROVIDER_URL``; one workflow of
three conversation turns (three agent runs, each given the history so far); prints the
outputs and the usage as JSON. The same worker id each time, so a rerun takes the killed run
back at once.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from surefoot import durable
from surefoot.integrations.pydantic_ai import SurefootDurability

app = durable.App(sys.argv[1], worker_id="pai-openai-worker", lease=30.0, poll=0.05)
client = AsyncOpenAI(base_url=sys.argv[2], api_key="test-key")
model = OpenAIChatModel("served-model", provider=OpenAIProvider(openai_client=client))
agent = Agent(model, name="chat", capabilities=[SurefootDurability(app)])


@app.workflow
async def conversation() -> dict[str, Any]:
    history = None
    outputs, requests, tokens = [], 0, 0
    for i in (1, 2, 3):
        result = await agent.run(f"question {i}", message_history=history)
        history = result.all_messages()
        outputs.append(result.output)
        usage = result.usage()  # this turn's: its request, replayed or made
        requests += usage.requests
        tokens += usage.output_tokens
    await client.close()
    return {"outputs": outputs, "requests": requests, "output_tokens": tokens}


if __name__ == "__main__":
    print(json.dumps(app.start(conversation, run_id="pai-run-1").result(timeout=120)), flush=True)
    app.close()
