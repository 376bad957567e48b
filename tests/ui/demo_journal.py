"""A journal with runs in every state, built through the public API (for the ui tests and
the docs' screenshots): succeeded, failed, pending, sleeping on a timer, waiting for a
signal, cancelled, a saga whose compensation fails (needs_attention), an effect of unknown
outcome (needs_attention), a crashed run resumed by another worker, and a fork."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker
from surefoot.errors import RunFailedError
from surefoot.statebus import Store, Stream


@dataclass
class Services:
    """What the fake outside world saw, and the undo that is broken."""

    booked: list[str] = field(default_factory=list)
    undone: list[str] = field(default_factory=list)
    sent: list[str | None] = field(default_factory=list)
    broken: set[str] = field(default_factory=lambda: {"hotel"})


def register(app: App, svc: Services) -> dict[str, Any]:
    """The demo workflows, registered on ``app``."""

    def cancel_booking(item: str, *, key: str | None, result: str) -> None:
        if item in svc.broken:
            raise ConnectionError(f"the {item} provider refused the cancellation (HTTP 503)")
        svc.undone.append(result)

    @app.step(effect=True, compensate=cancel_booking, compensate_retry=2)
    def book(item: str, *, key: str | None) -> str:
        svc.booked.append(item)
        return f"booking-{item}-{len(svc.booked)}"

    @app.step
    def pay(amount: int) -> str:
        if amount > 1000:
            raise RuntimeError(f"card declined for {amount} EUR")
        return f"paid {amount}"

    @app.workflow(name="trip", version="3")
    def trip(amount: int) -> list[str]:
        return [book("flight"), book("hotel"), book("car"), pay(amount)]

    @app.step
    def plan(question: str) -> list[str]:
        return [f"search: {question}", "read the top 3", "summarize"]

    @app.step
    def summarize(notes: list[str]) -> str:
        return "A summary of " + "; ".join(notes) + ". " + "Details follow. " * 40

    @app.step(effect=True)
    def publish(text: str, *, key: str | None) -> str:
        svc.sent.append(key)
        return f"post-{len(svc.sent)}"

    @app.step(effect=True)
    def send_email(to: str) -> str:  # takes no key: a rerun could send it twice
        svc.sent.append(to)
        return f"mail to {to}"

    @app.workflow(name="research", version="2")
    def research(question: str) -> str:
        notes = plan(question)
        text = summarize(notes)
        return publish(text)

    @app.workflow(name="notify", version="1")
    def notify(to: str) -> str:
        return send_email(to)

    @app.workflow(name="digest", version="1")
    async def digest(topic: str) -> str:
        await app.sleep(3600)
        return topic

    @app.workflow(name="approval", version="1")
    async def approval(draft: str) -> Any:
        return await app.wait_for("approve", timeout=86400)

    @app.workflow(name="report", version="1")
    def report(n: int) -> int:
        raise ValueError(f"report {n} has no data source configured")

    return {
        "trip": trip,
        "research": research,
        "notify": notify,
        "digest": digest,
        "approval": approval,
        "report": report,
    }


def _quiet(fn: Any) -> None:
    try:
        fn()
    except (SimulatedCrash, RunFailedError):  # the demo expects crashes and failures
        pass


def build(url: str) -> dict[str, str]:
    """Fill the journal at ``url`` with one run per state; returns state -> run id."""
    svc = Services()
    ids: dict[str, str] = {}
    with App(url, worker_id="worker-a", lease=0.3, poll=0.01) as app:
        wf = register(app, svc)
        app.start(wf["research"], "why is the sky blue?", run_id="research-ok").result(timeout=10)
        ids["succeeded"] = "research-ok"
        _quiet(lambda: app.start(wf["report"], 7, run_id="report-7").result(timeout=10))
        ids["failed"] = "report-7"
        _quiet(lambda: app.start(wf["trip"], 2400, run_id="trip-rome").result(timeout=10))
        ids["needs_attention"] = "trip-rome"
        for rid, name, arg in (
            ("digest-daily", "digest", "weather"),
            ("approval-42", "approval", "draft 42"),
            ("digest-cancelled", "digest", "sports"),
        ):
            app.enqueue(name, arg, run_id=rid)
        Worker(app).run_once(timeout=10)
        ids["sleeping"] = "digest-daily"
        ids["waiting"] = "approval-42"
        app.cancel("digest-cancelled", reason="topic dropped by the editor")
        ids["cancelled"] = "digest-cancelled"
        app.crash = CrashPlan("after_effect", step="send_email")
        _quiet(
            lambda: app.start(wf["notify"], "ops@example.com", run_id="notify-ops").result(
                timeout=10
            )
        )
        app.crash = CrashPlan("after_effect", step="publish")
        _quiet(
            lambda: app.start(wf["research"], "and the sea?", run_id="research-crash").result(
                timeout=10
            )
        )
        app.crash = CrashPlan("after_journal", step="plan")
        _quiet(
            lambda: app.start(wf["research"], "stuck", run_id="research-stuck").result(timeout=10)
        )
        ids["running"] = "research-stuck"  # its worker died; its lease expires, nobody resumes it
        app.crash = None
        app.enqueue("research", "tides", run_id="research-queued")
        ids["pending"] = "research-queued"
    time.sleep(0.4)  # worker-a is "dead": let its leases expire
    with App(url, worker_id="worker-b", lease=30, poll=0.01) as other:
        register(other, svc)
        other.resume("research-crash").result(timeout=10)
        ids["resumed"] = "research-crash"
        _quiet(lambda: other.resume("notify-ops").result(timeout=10))
        ids["unknown_outcome"] = "notify-ops"
        other.fork("research-ok", "2", new_run_id="research-ok-fork")
        ids["fork"] = "research-ok-fork"
    return ids


def build_store(url: str) -> None:
    """A namespace with keys of every trust level, and a stream with dead letters."""
    st = Store(url, namespace="default")
    st.register_agent("planner", trust="trusted", read=["*"], write=["plan/*", "report/*"])
    st.register_agent("web-reader", trust="untrusted", read=["*"], write=["notes/*"])
    st.write("config/deadline", "2026-12-05")
    st.session("planner").write("plan/outline", ["intro", "method", "results"])
    st.session("web-reader").write("notes/source-1", {"url": "https://example.org/a", "quote": "…"})
    st.session("planner").write("report/draft", "Findings so far. " * 30)
    st.close()
    s = Stream(url, "tasks")
    for i in range(1, 6):
        s.append({"task": f"summarize page {i}"}, message_id=f"task-{i}")
    c = s.consumer("summarizers", max_attempts=2)
    for m in c.fetch(5, worker="w1"):
        if m.seq in (2, 4):
            c.nack(m)
        else:
            c.ack(m)
    for m in c.fetch(5, worker="w2"):
        if m.seq == 2:
            c.reject(m, reason="schema: missing field 'url'")
        else:
            c.nack(m)
    c.fetch(5, worker="w3")  # seq 4 has had its 2 attempts: it becomes a dead letter
    s.close()


PAYLOADS = {
    "result": "<script>alert('result')</script>",
    "error": "<img src=x onerror=\"alert('error')\">",
    "signal": {
        "note": "javascript:alert('signal')",
        "html": '<a href="javascript:alert(1)">ok</a>',
    },
    "key": "<script>alert('key')</script>",
    "value": "<iframe src=\"javascript:alert('value')\"></iframe>[click](javascript:alert(2))",
    "run_id": "<b id=injected>run</b>",
}
"""What an agent could write: script, HTML and ``javascript:`` links, in every place."""


def build_hostile(url: str, store_url: str) -> None:
    """Runs and a key whose values are script, HTML and ``javascript:`` payloads."""
    with App(url, worker_id="worker-x", poll=0.01) as app:

        @app.step
        def fetch() -> str:
            return PAYLOADS["result"]

        @app.step
        def parse(text: str) -> str:
            raise ValueError(PAYLOADS["error"])

        @app.workflow(name="hostile", version="<i>1</i>")
        def hostile() -> str:
            return parse(fetch())

        @app.workflow(name="gate", version="1")
        async def gate() -> Any:
            return await app.wait_for("approve", timeout=86400)

        _quiet(lambda: app.start(hostile, run_id=PAYLOADS["run_id"]).result(timeout=10))
        app.enqueue("gate", run_id="gate-1")
        Worker(app).run_once(timeout=10)
        app.signal("gate-1", "approve", PAYLOADS["signal"])
        Worker(app).run_once(timeout=10)
    st = Store(store_url, namespace="default")
    st.register_agent("web-reader", trust="untrusted", read=["*"], write=["*"])
    st.session("web-reader").write(PAYLOADS["key"], PAYLOADS["value"])
    st.close()
