"""Metrics: counters, breaker states, runs by state, queue depth and age, dead letters;
as Prometheus text and through OpenTelemetry's metric reader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import FakeClock, durable, telemetry
from surefoot.durable import App
from surefoot.errors import RunFailedError
from surefoot.resilience import CircuitBreaker, ProviderError
from surefoot.statebus import Stream


def fam(families: list[telemetry.Family], name: str) -> telemetry.Family:
    return next(f for f in families if f.name == name)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    a = App(f"sqlite:///{tmp_path / 'runs.db'}", clock=FakeClock(), poll=0.01, worker_id="w1")
    yield a
    a.close()


def test_run_states_match_the_durable_statuses() -> None:
    """The gauge's state list is exactly the statuses a journal holds."""
    assert set(telemetry.RUN_STATES) == set(durable.STATUSES)


def test_journal_gauges_count_runs_by_state_and_the_queue(app: App) -> None:
    """Three queued runs, one done, one failed: runs by state, depth 3, oldest age 30 s."""

    @app.workflow
    def ok(x: int) -> int:
        return x

    @app.workflow
    def boom() -> None:
        raise ValueError("no")

    clock: Any = app.clock
    app.enqueue(ok, 1, run_id="q1")
    clock.advance(10)
    app.enqueue(ok, 2, run_id="q2")
    app.enqueue(ok, 3, run_id="q3")
    assert app.start(ok, 4, run_id="done").result(timeout=10) == 4
    with pytest.raises(RunFailedError):
        app.start(boom, run_id="bad").result(timeout=10)
    clock.advance(20)
    got = telemetry.collect(journal=app.journal, now=clock.now())
    runs = fam(got, "surefoot_runs")
    assert runs.value(state="pending") == 3 and runs.value(state="succeeded") == 1
    assert runs.value(state="failed") == 1 and runs.value(state="needs_attention") == 0
    assert fam(got, "surefoot_queue_depth").value() == 3
    assert fam(got, "surefoot_queue_oldest_age_seconds").value() == pytest.approx(30.0)


def test_breaker_state_gauge_reads_live_breakers() -> None:
    """An open breaker reads 2, a closed one 0, by name."""
    clock = FakeClock()
    a = CircuitBreaker("metrics-a", failure_threshold=1, clock=clock)
    b = CircuitBreaker("metrics-b", clock=clock)

    def fail() -> None:
        raise ProviderError(503)

    with pytest.raises(ProviderError):
        a.call(fail)
    got = telemetry.collect()
    state = fam(got, "surefoot_breaker_state")
    assert state.value(breaker="metrics-a") == 2 and state.value(breaker="metrics-b") == 0
    assert fam(got, "surefoot_breaker_transitions_total").value(breaker="metrics-a", to="open")
    assert b.state == "closed"


def test_dead_letters_per_consumer(tmp_path: Path) -> None:
    """A rejected message counts as one dead letter of its stream and consumer group."""
    s = Stream(f"sqlite:///{tmp_path / 'bus.db'}", "findings", clock=FakeClock())
    try:
        c = s.consumer("reviewer")
        s.append({"n": 1}, message_id="m1")
        s.append({"n": 2}, message_id="m2")
        m1, m2 = c.fetch(2)
        c.reject(m1, reason="poison")
        got = telemetry.collect(consumers=[c])
        labels = {"stream": "findings", "consumer": "reviewer"}
        assert fam(got, "surefoot_dead_letters").value(**labels) == 1
        assert fam(got, "surefoot_stream_pending").value(**labels) == 1
        assert m2.seq == 2
    finally:
        s.close()


def test_stream_gauges_read_one_stats_call_per_stream(tmp_path: Path) -> None:
    """streams=[...]: kept messages per stream; pending, dead letters and lag per group, in
    the text format with escaped labels, from exactly one stats() call per stream."""
    url = f"sqlite:///{tmp_path / 'bus.db'}"
    jobs, odd = Stream(url, "jobs", clock=FakeClock()), Stream(url, 'odd"\nname')
    try:
        workers, slow = jobs.consumer("workers", max_attempts=1), jobs.consumer("slow")
        for i in range(1, 5):
            jobs.append({"n": i}, message_id=f"m{i}")
        m1, m2, m3 = workers.fetch(3)
        workers.ack(m1)
        workers.reject(m2, reason="poison")
        slow.ack(slow.fetch(1)[0])
        odd.consumer('g"1\\')
        odd.append("x", message_id="x")
        calls: list[str] = []
        for s in (jobs, odd):
            read = s.stats

            def counted(read: Any = read, name: str = s.name) -> Any:
                calls.append(name)
                return read()

            s.stats = counted  # type: ignore[method-assign]
        text = telemetry.prometheus_text(streams=[jobs, odd])
        assert sorted(calls) == sorted(["jobs", 'odd"\nname'])
        lines = text.splitlines()
        for line in (
            "# TYPE surefoot_stream_lag gauge",
            'surefoot_stream_messages{stream="jobs"} 4',
            'surefoot_stream_pending{consumer="workers",stream="jobs"} 1',
            'surefoot_dead_letters{consumer="workers",stream="jobs"} 1',
            'surefoot_stream_lag{consumer="workers",stream="jobs"} 1',
            'surefoot_stream_lag{consumer="slow",stream="jobs"} 3',
            'surefoot_dead_letters{consumer="slow",stream="jobs"} 0',
            'surefoot_stream_messages{stream="odd\\"\\nname"} 1',
            'surefoot_stream_lag{consumer="g\\"1\\\\",stream="odd\\"\\nname"} 1',
        ):
            assert line in lines, (line, text)
        assert m3.seq == 3
    finally:
        jobs.close()
        odd.close()


def test_a_stream_passed_twice_is_one_series(tmp_path: Path) -> None:
    """streams=[s, s] (or s and its name's other handle): one stats() call and one series per
    stream name; Prometheus refuses a scrape that repeats a series."""
    url = f"sqlite:///{tmp_path / 'bus.db'}"
    a, again = Stream(url, "jobs"), Stream(url, "jobs")
    try:
        a.append(1, message_id="m1")
        calls: list[str] = []
        for s in (a, again):
            read = s.stats

            def counted(read: Any = read, name: str = s.name) -> Any:
                calls.append(name)
                return read()

            s.stats = counted  # type: ignore[method-assign]
        text = telemetry.prometheus_text(streams=[a, again, a])
        assert calls == ["jobs"]
        assert text.splitlines().count('surefoot_stream_messages{stream="jobs"} 1') == 1
    finally:
        a.close()
        again.close()


def test_consumers_of_one_stream_share_one_stats_call(tmp_path: Path) -> None:
    """consumers=[a, b] of one stream: one stats() call, only those two groups counted."""
    s = Stream(f"sqlite:///{tmp_path / 'bus.db'}", "findings")
    try:
        a, b = s.consumer("a"), s.consumer("b")
        s.consumer("not-passed")
        s.append(1, message_id="m1")
        a.fetch(1)
        read, calls = s.stats, []
        s.stats = lambda: calls.append(1) or read()  # type: ignore[method-assign,func-returns-value]
        got = telemetry.collect(consumers=[a, b])
        assert calls == [1]
        lag = fam(got, "surefoot_stream_lag")
        assert {dict(ls)["consumer"]: v for ls, v in lag.samples} == {"a": 0, "b": 1}
        assert fam(got, "surefoot_stream_pending").value(consumer="a", stream="findings") == 1
    finally:
        s.close()


def test_prometheus_text_is_well_formed(app: App) -> None:
    """Every family has HELP and TYPE lines, samples carry quoted labels, values are numbers."""
    telemetry.RETRY_DECISIONS.inc("retry", "retryable", 'Odd"Error')
    text = telemetry.prometheus_text(journal=app.journal, now=app.clock.now())
    assert "# TYPE surefoot_runs gauge" in text
    assert 'surefoot_runs{state="pending"} 0' in text
    assert "surefoot_queue_depth 0" in text
    assert (
        'surefoot_retry_decisions_total{decision="retry",error_type="Odd\\"Error",'
        'reason="retryable"} 1' in text
    )
    for line in text.splitlines():
        if not line.startswith("#"):
            name_labels, value = line.rsplit(" ", 1)
            float(value)
            assert name_labels.startswith("surefoot_")


def test_otel_reader_sees_the_same_numbers(app: App) -> None:
    """bind_otel: an InMemoryMetricReader collects runs by state and retry decisions."""
    sdk = pytest.importorskip("opentelemetry.sdk.metrics")
    export = pytest.importorskip("opentelemetry.sdk.metrics.export")

    @app.workflow
    def ok() -> int:
        return 1

    app.enqueue(ok, run_id="p1")
    telemetry.RETRY_DECISIONS.inc("give_up", "deadline", "TimeoutError_")
    reader = export.InMemoryMetricReader()
    provider = sdk.MeterProvider(metric_readers=[reader])
    try:
        telemetry.bind_otel(provider, journal=app.journal, clock=app.clock.now)
        data = reader.get_metrics_data()
    finally:
        provider.shutdown()
    points: dict[str, list[Any]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                points[m.name] = list(m.data.data_points)
    pending = [p for p in points["surefoot.runs"] if p.attributes["state"] == "pending"]
    assert [p.value for p in pending] == [1]
    (decision,) = points["surefoot.retry.decisions"]
    assert decision.value == 1 and decision.attributes["reason"] == "deadline"
    assert [p.value for p in points["surefoot.queue.depth"]] == [1]


def test_a_run_whose_lease_expired_counts_in_the_queue(app: App) -> None:
    """A running run held by a dead worker is claimable once its lease expired: depth 1,
    age measured from the lease's end."""

    @app.workflow
    def ok() -> int:
        return 1

    clock: Any = app.clock
    app.enqueue(ok, run_id="held")
    app.journal.claim(
        "dead", now=clock.now(), lease_until=clock.now() + 5, workflows=app.registered(), limit=1
    )
    held = telemetry.collect(journal=app.journal, now=clock.now())
    assert fam(held, "surefoot_queue_depth").value() == 0
    clock.advance(12)
    got = telemetry.collect(journal=app.journal, now=clock.now())
    assert fam(got, "surefoot_runs").value(state="running") == 1
    assert fam(got, "surefoot_queue_depth").value() == 1
    assert fam(got, "surefoot_queue_oldest_age_seconds").value() == pytest.approx(7.0)


def test_journal_gauges_read_aggregates_not_runs(app: App) -> None:
    """A scrape of 300 runs issues two queries and fetches 4 rows, whatever the size."""

    @app.workflow
    def ok(x: int) -> int:
        return x

    clock: Any = app.clock
    rows = [app.journal.get_run(app.enqueue(ok, i, run_id=f"r{i}").run_id) for i in range(300)]
    assert all(r is not None for r in rows)
    d: Any = app.journal.wrapped.d  # type: ignore[attr-defined]
    seen: list[tuple[str, int]] = []
    read = d.read

    def counting(sql: str, params: Any = ()) -> list[Any]:
        out = read(sql, params)
        seen.append((sql, len(out)))
        return list(out)

    d.read = counting
    try:
        clock.advance(5)
        got = telemetry.collect(journal=app.journal, now=clock.now())
    finally:
        d.read = read
    assert fam(got, "surefoot_runs").value(state="pending") == 300
    assert fam(got, "surefoot_queue_depth").value() == 300
    assert fam(got, "surefoot_queue_oldest_age_seconds").value() == pytest.approx(5.0)
    assert len(seen) == 2  # counts per state, then the backlog
    assert sum(n for _, n in seen) <= 1 + 3  # one row per state present, three backlog parts
    assert not any("args" in sql or "SELECT run_id" in sql for sql, _ in seen)


def test_backlog_counts_due_sleepers_and_expired_leases(app: App) -> None:
    """A run whose lease ran out 4 s ago is claimable since then; a held one is not."""

    @app.workflow
    def ok(x: int) -> int:
        return x

    clock: Any = app.clock
    app.enqueue(ok, 1, run_id="held")
    app.enqueue(ok, 2, run_id="lapsed")
    j = app.journal
    t = clock.now()
    assert j.claim("w9", now=t, lease_until=t + 1, workflows=[], limit=1, run_id="lapsed")
    assert j.claim("w9", now=t, lease_until=t + 60, workflows=[], limit=1, run_id="held")
    clock.advance(5)
    assert j.backlog(now=clock.now()) == (1, t + 1)
    got = telemetry.collect(journal=j, now=clock.now())
    assert fam(got, "surefoot_queue_oldest_age_seconds").value() == pytest.approx(4.0)
