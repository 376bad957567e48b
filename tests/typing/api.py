"""The public API as a user types it: checked by ``mypy --strict``, never executed.

Each block uses one subsystem the way the docs do and pins the types it gets back with
``assert_type``; a changed signature or return type of a public name breaks ``make
typecheck``. Not collected by pytest (no ``test_`` prefix) and never imported.
"""

from __future__ import annotations

import random
from typing import Any, assert_type

import surefoot
from surefoot import FakeClock, clock, codec, errors, storage, testing
from surefoot.durable import (
    App,
    Batching,
    RunDetail,
    RunHandle,
    RunStream,
    StreamEvent,
    Workflow,
    current_run,
    emit,
    step_texts,
)
from surefoot.guard import (
    CapabilityPolicy,
    Condition,
    Delegation,
    Labeled,
    Plan,
    document_of,
    label_of,
    labeled,
    trusted,
)
from surefoot.llm import ChatCompletion, FakeLLM, count_tokens
from surefoot.resilience import (
    Backoff,
    CircuitBreaker,
    Decision,
    RetryPolicy,
    classify,
    is_retryable,
    retry,
    retry_call,
)
from surefoot.statebus import (
    AgentSession,
    AgentSpec,
    Change,
    ConsumerStats,
    Entry,
    Lease,
    Message,
    Proposal,
    Resolution,
    Store,
    Stream,
    StreamEntry,
    StreamStats,
    TxnResult,
    Watch,
    judge,
    priority,
    streams,
    vote,
)


def core(fake: FakeClock) -> None:
    """Clock, codec, errors and the top-level re-exports."""
    assert_type(surefoot.__version__, str)
    assert_type(fake.now(), float)
    sys_clock: clock.Clock = clock.SystemClock()
    assert_type(sys_clock.now(), float)
    assert_type(codec.dumps({"a": 1}), str)
    assert_type(codec.loads("{}"), Any)
    err: errors.SurefootError = errors.ConfigError("bad value")
    assert_type(isinstance(err, surefoot.SurefootError), bool)


def resilience(fake: FakeClock) -> None:
    """Retries, classification, back-off, the breaker and fault injection."""
    policy = RetryPolicy(max_attempts=3)
    assert_type(policy, RetryPolicy)

    def fetch(n: int) -> str:
        return str(n)

    assert_type(retry_call(fetch, 1, policy=policy, clock=fake), str)

    @retry(max_attempts=4, clock=fake)
    def decorated(x: int, *, y: str = "") -> float:
        return float(x)

    assert_type(decorated(1, y="a"), float)

    @retry
    def bare() -> int:
        return 1

    assert_type(bare(), int)
    assert_type(classify(503), Decision)
    assert_type(classify(503).retry, bool)
    assert_type(is_retryable(ConnectionResetError()), bool)
    assert_type(Backoff(), Backoff)
    breaker = CircuitBreaker("llm", failure_threshold=3, clock=fake)
    assert_type(breaker.call(fetch, 2), str)


def llm() -> None:
    """The FakeLLM: an OpenAI-shaped client that counts what it receives."""
    fake = FakeLLM(seed=0)
    reply = fake.create(model="fake-1", messages=[{"role": "user", "content": "hi"}])
    assert_type(reply, ChatCompletion)
    assert_type(fake.calls, int)
    assert_type(count_tokens("hello"), int)


def durable(fake: FakeClock) -> None:
    """Workflows and steps on a journal; handles and run details."""
    app = App("sqlite:///runs.db", clock=fake)
    assert_type(App("sqlite://", value_chunks=None).value_chunks, int)
    assert_type(App("sqlite://", value_chunks=16384).value_chunks, int)

    @app.step
    def add(a: int, b: int) -> int:
        return a + b

    @app.workflow
    def total(xs: list[int]) -> int:
        assert_type(current_run().run_id, str)
        return sum(add(x, 0) for x in xs)

    assert_type(total, Workflow)
    handle = app.start(total, [1, 2], run_id="r-1")
    assert_type(handle, RunHandle)
    assert_type(handle.status(), str)
    assert_type(handle.result(timeout=5), Any)
    assert_type(app.show("r-1"), RunDetail)
    assert_type(emit("a token"), bool)
    stream = handle.stream(after=3, timeout=1.0)
    assert_type(stream, RunStream)
    for event in stream:
        assert_type(event, StreamEvent)
        assert_type(event.offset, int)
    assert_type(step_texts(handle.stream()), dict[str, str])
    assert_type(App("sqlite://", stream_batching=Batching(16, 0.01)).tokens.batching, Batching)
    app.close()


def statebus(fake: FakeClock) -> None:
    """The Store, sessions and leases; the Stream; resolvers; trust labels."""
    st = Store("sqlite:///team.db", namespace="team", clock=fake)
    assert_type(st.register_agent("a", trust="trusted"), AgentSpec)
    session = st.session("a")
    assert_type(session, AgentSession)
    assert_type(st.write("k", 1, expect=0), Entry)
    assert_type(st.read("k"), Entry | None)
    assert_type(session.write("k", 2, expect=1), Entry)
    assert_type(session.acquire("report", 5.0), Lease | None)
    entry = st.write("card", {"title": "t"})
    assert_type(entry.version, int)
    assert_type(entry.value, Any)
    assert_type(st.write("tmp", 1, ttl=5.0), Entry)
    assert_type(st.delete("tmp", expect=1), Change | None)
    assert_type(st.history("card"), list[Change])
    assert_type(st.read_at("card", 1), Change | None)
    assert_type(st.compact(keep=10), int)
    assert_type(st.watch("card", after_revision=0, timeout=1.0), Watch)
    assert_type(st.txn({"card": 1}, [("put", "status", "done")]), TxnResult)
    assert_type(labeled(entry), Labeled[Any])
    label_of(entry)
    stream = Stream("sqlite:///team.db", "findings", clock=fake)
    assert_type(stream.append({"x": 1}, message_id="m-1"), StreamEntry)
    assert_type(stream.read(after=0, limit=10), list[StreamEntry])
    bounded = Stream("sqlite:///team.db", "events", max_messages=1000, max_age=3600.0)
    assert_type(bounded.trim(), int)
    assert_type(bounded.stats(), StreamStats)
    consumer = bounded.consumer("summariser")
    assert_type(consumer.fetch(10, block=1.0), list[Message])
    assert_type(consumer.stats(), ConsumerStats)
    assert_type(consumer.lag, int)
    assert_type(streams("sqlite:///team.db"), dict[str, int])
    props = [Proposal("a", 1), Proposal("b", 2)]
    assert_type(priority(props, ["a", "b"]), Resolution)
    assert_type(vote(props, ["a", "b"]), Resolution)
    assert_type(judge(props, FakeLLM(seed=0), field="f", rng=random.Random(0)), Resolution)
    grant = Delegation("invite.email", "get_webpage", "www.example.com")
    policy = CapabilityPolicy("p", []).delegate(trusted("see www.example.com"), [])
    assert_type(policy, CapabilityPolicy)
    assert_type(grant.covers("invite", "email", "document:x[y].z"), bool)
    assert_type(document_of("document:get_webpage[www.example.com].text"), tuple[str, str] | None)
    plan = Plan.from_dict({"steps": [{"id": "s", "if": {"left": 1, "op": "<", "right": 2}}]})
    assert_type(plan.steps[0].when, Condition | None)


def storage_and_testing() -> None:
    """Storage by URL and the helpers for users' tests."""
    assert_type(storage.open("memory://"), storage.Storage)
    assert_type(storage.parse_url("sqlite:///x.db"), storage.StorageURL)
    with testing.instant_retries() as fake:
        assert_type(fake, FakeClock)
