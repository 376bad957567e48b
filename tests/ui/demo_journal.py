"""A journal with runs in every state, built through the public API (for the ui tests and
the docs' screenshots): succeeded, failed, pending, sleeping on a timer, waiting for a
signal, cancelled, a saga whose compensation fails (needs_attention), an effect of unknown
outcome (needs_attention), a run taken over by another worker after its first worker froze
(its late write fenced), a marked answer derived from untrusted data, and a fork."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker
from surefoot.errors import RunFailedError
from surefoot.guard import Answer, CapabilityPolicy, Label, Labeled, derive
from surefoot.statebus import Store, Stream


@dataclass
class Services:
    """What the fake outside world saw, and the undo that is broken."""

    booked: list[str] = field(default_factory=list)
    undone: list[str] = field(default_factory=list)
    sent: list[str | None] = field(default_factory=list)
    broken: set[str] = field(default_factory=lambda: {"hotel"})
    freeze: threading.Event | None = None  # set: the next summarize blocks until it is set
    frozen: threading.Event = field(default_factory=threading.Event)


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
        gate, svc.freeze = svc.freeze, None
        if gate is not None:  # this worker freezes mid-step: no beat, no write, for a while
            svc.frozen.set()
            gate.wait(30)
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

    @app.step
    def read_page(url: str) -> str:
        return "High water at Brest today is at 14:05 <b>(source: tides-blog)</b>."

    @app.workflow(name="answer", version="1")
    def answer(question: str) -> Answer:
        # the page a web-reader agent fetched is untrusted; the answer derived from it is
        # allowed out, marked (CapabilityPolicy.check_answer: the final answer is a sink)
        page = Labeled(
            read_page("https://tides.example/brest"), Label.of("web-reader", "untrusted")
        )
        text = derive(lambda p: f"{question} {p}", page)
        return CapabilityPolicy("research-answers").check_answer(text)

    return {
        "trip": trip,
        "research": research,
        "notify": notify,
        "digest": digest,
        "approval": approval,
        "report": report,
        "answer": answer,
    }


def _quiet(fn: Any) -> None:
    try:
        fn()
    except (SimulatedCrash, RunFailedError):  # the demo expects crashes and failures
        pass


TAKEOVER_LEASE = 60.0
"""The lease of the takeover story's workers (they beat every 20 s of real time, which
the story never waits: a frozen worker renews nothing)."""


def build_takeover(url: str, svc: Services, run_id: str = "research-crash") -> None:
    """The whole story of a crash, with the real workers and a controllable clock.

    worker-a claims the run (audit: claimed, epoch 1), journals step 1 and freezes in step
    2: it stops heartbeating. The clock moves past its lease; worker-b's poll takes the
    run over (audit: taken_over, previous epoch 1, epoch 2), replays step 1 from the
    journal and runs steps 2 and 3 (the effect, with key ``run_id:3``). worker-a then wakes
    up and tries to journal its step 2: refused, fenced by the epoch (audit: lease_lost).
    """
    clock = FakeClock(time.time() - 600)  # ten minutes ago: the story is over by now
    gate = svc.freeze = threading.Event()
    svc.frozen.clear()
    with App(url, clock=clock, worker_id="worker-a", lease=TAKEOVER_LEASE, poll=0.01) as a:
        register(a, svc)
        a.enqueue("research", "what moves the tides?", run_id=run_id)
        frozen_worker = Worker(a)
        assert frozen_worker.claim() == 1
        assert svc.frozen.wait(30), "worker-a never reached its step 2"
        clock.advance(TAKEOVER_LEASE + 5)  # worker-a's lease runs out: it renewed nothing
        with App(url, clock=clock, worker_id="worker-b", lease=TAKEOVER_LEASE, poll=0.01) as b:
            register(b, svc)
            assert Worker(b).run_once(timeout=30) == 1, "worker-b did not take the run over"
            assert b.handle(run_id).status() == "succeeded"
        clock.advance(7)  # worker-a wakes up, a little later still
        gate.set()
        frozen_worker.run_once(timeout=30)  # its late write is refused: lease_lost


def build(url: str) -> dict[str, str]:
    """Fill the journal at ``url`` with one run per state; returns state -> run id."""
    svc = Services()
    ids: dict[str, str] = {}
    build_takeover(url, svc)
    ids["resumed"] = "research-crash"
    with App(url, worker_id="worker-a", lease=0.3, poll=0.01) as app:
        wf = register(app, svc)
        app.start(wf["research"], "why is the sky blue?", run_id="research-ok").result(timeout=10)
        app.start(wf["answer"], "When is high water?", run_id="answer-tides").result(timeout=10)
        ids["marked_answer"] = "answer-tides"
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
        _quiet(lambda: other.resume("notify-ops").result(timeout=10))
        ids["unknown_outcome"] = "notify-ops"
        other.fork("research-ok", "2", new_run_id="research-ok-fork")
        ids["fork"] = "research-ok-fork"
    return ids


def build_store(url: str) -> None:
    """A namespace with keys of every trust level; stream ``tasks`` whose group
    ``summarizers`` has two dead letters (seq 2 rejected, seq 4 out of attempts), and
    stream ``updates`` (at most 3 messages kept: 6 appended, 3 trimmed) whose group
    ``notifier`` is at position 4 with 1 pending, lag 2, and ``indexer`` at 3, lag 3."""
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
    u = Stream(url, "updates", max_messages=3)
    notifier = u.consumer("notifier")
    for i in range(1, 4):
        u.append({"update": i}, message_id=f"update-{i}")
    notifier.ack_many(notifier.fetch(3, worker="n1"))
    for i in range(4, 7):
        u.append({"update": i}, message_id=f"update-{i}")  # trims the acked 1-3
    notifier.fetch(1, worker="n1")  # seq 4, not acked yet
    u.consumer("indexer")  # registered after the trim: starts before seq 4
    u.close()


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
    "answer": "<script>alert('answer')</script> [ok](javascript:alert(3))",
    "source": "<img src=x onerror=\"alert('source')\">",
    "stream": "<script>alert('stream')</script>",
    "group": "<img src=x onerror=\"alert('group')\">",
    "message": '<a href="javascript:alert(4)">message</a>',
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

        @app.workflow(name="hostile-answer", version="1")
        def hostile_answer() -> Answer:
            page = Labeled(PAYLOADS["answer"], Label.of(PAYLOADS["source"], "untrusted"))
            return CapabilityPolicy("answers").check_answer(page)

        app.start(hostile_answer, run_id="answer-x").result(timeout=10)

        _quiet(lambda: app.start(hostile, run_id=PAYLOADS["run_id"]).result(timeout=10))
        app.enqueue("gate", run_id="gate-1")
        Worker(app).run_once(timeout=10)
        app.signal("gate-1", "approve", PAYLOADS["signal"])
        Worker(app).run_once(timeout=10)
    st = Store(store_url, namespace="default")
    st.register_agent("web-reader", trust="untrusted", read=["*"], write=["*"])
    st.session("web-reader").write(PAYLOADS["key"], PAYLOADS["value"])
    st.close()
    s = Stream(store_url, PAYLOADS["stream"])
    s.append({"html": PAYLOADS["message"]}, message_id=PAYLOADS["message"])
    c = s.consumer(PAYLOADS["group"])
    for m in c.fetch(1):
        c.reject(m, reason=PAYLOADS["message"])
    s.close()
