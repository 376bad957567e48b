"""A run with a whole story for the inspector's waterfall: worker-a planned, asked a model
that answered 503, then 429, then ok, searched, and died inside its effect ``draft``; after
its lease ran out an operator resumed it on worker-b, which replayed steps 1-3, ran
``draft`` again and finished after a 2 s wait for review. Built with the real engine on a
``FakeClock`` (no wall time), the model a scripted ``FakeLLM`` (no real model)."""

from __future__ import annotations

from typing import Any

from surefoot import FakeClock, durable, llm
from surefoot.llm import FakeLLM
from surefoot.resilience import RetryPolicy, faults

RUN_ID = "research-resumed"
LEASE = 10.0


def register(app: durable.App, clock: FakeClock, script: list[Any]) -> Any:
    model = llm.connect(
        "fake",
        llm=FakeLLM(seed=0, clock=clock, latency=0.8, failures=faults.Script(script)),
        clock=clock,
        policy=RetryPolicy(max_attempts=4),
    )

    @app.step
    def plan(q: str) -> list[str]:
        clock.sleep(0.4)
        return ["tides", "moon"]

    @app.step
    def ask(topics: list[str]) -> str:
        return str(model.create(messages=[{"role": "user", "content": " ".join(topics)}]).text)

    @app.step
    def search(answer: str) -> list[str]:
        clock.sleep(1.1)
        return ["https://example.org/tides"]

    @app.step(effect=True)
    def draft(sources: list[str], *, key: str | None = None) -> str:
        clock.sleep(1.5)
        return f"draft citing {len(sources)} source(s)"

    @app.workflow
    def research(q: str) -> str:
        sources = search(ask(plan(q)))
        text = draft(sources)
        app.sleep(2.0)  # a review window
        return text

    return research


def build(url: str, worker_a: str = "worker-a", worker_b: str = "worker-b") -> str:
    """Write the run into the journal at ``url``; its run id."""
    clock = FakeClock()
    with durable.App(url, clock=clock, worker_id=worker_a, lease=LEASE, poll=0.01) as a:
        wf = register(a, clock, [503, 429, None])
        a.crash = durable.CrashPlan("after_effect", step="draft")
        try:
            a.start(wf, "When is high water?", run_id=RUN_ID).result(timeout=30)
        except durable.SimulatedCrash:
            pass
    clock.advance(LEASE + 1.5)  # dead: nobody renews the lease
    with durable.App(url, clock=clock, worker_id=worker_b, lease=LEASE, poll=0.01) as b:
        register(b, clock, [])
        assert b.resume(RUN_ID).result(timeout=30) == "draft citing 1 source(s)"
    return RUN_ID
