"""A resumed run sees exactly the values an uncrashed run sees: every value read back from
the journal (step results, workflow results and arguments, signal payloads, a fork's
copied steps, a saga's recorded results) comes back as the type the code declares."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash
from surefoot.errors import DecodeError, RunFailedError, TimeoutError_, UnsupportedTypeError


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Opaque:
    """A plain class: nothing says how to build one from JSON."""


class Point(NamedTuple):
    x: int
    y: int


@dataclasses.dataclass(frozen=True)
class Finding:
    text: str
    score: float
    color: Color
    at: dt.datetime
    tags: tuple[str, ...] = ()


@dataclasses.dataclass
class Report:
    findings: list[Finding]
    by_level: dict[Level, Point]
    seen: frozenset[str]


def _finding(i: int) -> Finding:
    at = dt.datetime(2026, 1, 1 + i % 27, 12, tzinfo=dt.UTC)
    return Finding(f"f{i}", i / 4, Color.RED if i % 2 else Color.BLUE, at, ("a", str(i)))


def _crash_then_resume(app: App, flow: Any, *args: Any, run_id: str) -> Any:
    try:
        return app.start(flow, *args, run_id=run_id).result(timeout=10)
    except SimulatedCrash:
        app.crash = None
        return app.resume(run_id).result(timeout=10)


def test_a_dataclass_step_result_keeps_its_type_after_a_crash(tmp_path: Path) -> None:
    """A step returning a dataclass gives the workflow that dataclass after a crash too."""
    seen: list[Any] = []
    with App(f"sqlite:///{tmp_path / 'r.db'}", clock=FakeClock(), poll=0.01) as app:

        @app.step
        def find(i: int) -> Finding:
            return _finding(i)

        @app.step
        def later() -> int:
            return 1

        @app.workflow
        def flow() -> str:
            f = find(3)
            seen.append(f)
            later()
            return f.text

        app.crash = CrashPlan("before_step", step="2")
        assert _crash_then_resume(app, flow, run_id="r") == "f3"
    assert [type(x) for x in seen] == [Finding, Finding]
    assert seen[0] == seen[1] == _finding(3)


def test_workflow_result_and_arguments_come_back_as_annotated(tmp_path: Path) -> None:
    """handle.result() and app.handle(...).result() give the workflow's declared type, and
    the workflow gets its arguments as its parameters declare them."""
    got: list[Any] = []
    with App(f"sqlite:///{tmp_path / 'r.db'}", clock=FakeClock(), poll=0.01) as app:

        @app.workflow
        def flow(p: Point, when: dt.date, levels: list[Level]) -> Report:
            got.extend([p, when, levels])
            return Report([_finding(1)], {Level.HIGH: p}, frozenset({"x"}))

        h = app.start(flow, Point(1, 2), dt.date(2026, 3, 4), [Level.LOW], run_id="r")
        want = Report([_finding(1)], {Level.HIGH: Point(1, 2)}, frozenset({"x"}))
        assert h.result(timeout=10) == want
        again = app.handle("r").result(timeout=10)
        assert type(again) is Report and again == want
        assert type(again.by_level[Level.HIGH]) is Point
    assert got == [Point(1, 2), dt.date(2026, 3, 4), [Level.LOW]]
    assert [type(x) for x in got] == [Point, dt.date, list]
    assert type(got[2][0]) is Level


def test_signal_payload_is_read_as_the_type_wait_for_declares(tmp_path: Path) -> None:
    """wait_for(name, type=T) gives a T when the signal arrives and on every replay after."""
    seen: list[Any] = []
    with App(f"sqlite:///{tmp_path / 'r.db'}", clock=FakeClock(), poll=0.01) as app:

        @app.step
        def after(text: str) -> str:
            return text.upper()

        @app.workflow
        def flow() -> str:
            f = app.wait_for("approve", type=Finding)
            seen.append(f)
            return after(f.text)

        h = app.start(flow, run_id="r")
        with pytest.raises(TimeoutError_):
            h.result(timeout=0.05)
        app.signal("r", "approve", _finding(2))
        app.crash = CrashPlan("before_step", step="2")
        try:
            h.result(timeout=10)
        except SimulatedCrash:
            app.crash = None
        assert app.resume("r").result(timeout=10) == "F2"
    assert len(seen) >= 2 and all(type(x) is Finding and x == _finding(2) for x in seen)


def test_wait_for_refuses_a_type_it_cannot_rebuild(app: App) -> None:
    """wait_for(type=<a plain class>) fails at once, naming the wait, instead of later."""

    @app.workflow
    def flow() -> None:
        app.wait_for("go", type=Opaque)

    with pytest.raises(RunFailedError, match=r"wait_for\('go'\)"):
        app.start(flow, run_id="r").result(timeout=10)
    assert "Opaque" in (app.show("r").run.error or {}).get("message", "")


def test_an_unrebuildable_return_annotation_fails_at_decoration(app: App) -> None:
    """A step annotated with a class the codec cannot build is refused when decorated,
    naming the step and the annotation."""

    def fetch() -> Opaque:
        return Opaque()

    with pytest.raises(UnsupportedTypeError, match=r"Opaque.*step 'fetch'"):
        app.step(fetch)

    def flow(x: Opaque) -> None:
        return None

    with pytest.raises(UnsupportedTypeError, match=r"argument 'x' of workflow 'flow'"):
        app.workflow(flow)


def test_a_value_the_journal_would_change_fails_at_the_step(app: App) -> None:
    """A step that declares no type and returns an unregistered dataclass (or returns a
    tuple for ``-> list``) fails at the step, saying what to declare, instead of giving a
    resumed run a dict."""

    @app.step
    def loose():  # type: ignore[no-untyped-def]
        return _finding(1)

    @app.step
    def wrong() -> list[int]:
        return (1, 2)  # type: ignore[return-value]

    @app.workflow
    def flow(which: str) -> None:
        (loose if which == "loose" else wrong)()

    with pytest.raises(RunFailedError, match="Finding"):
        app.start(flow, "loose", run_id="a").result(timeout=10)
    msg = (app.show("a").run.error or {}).get("message", "")
    assert (app.show("a").run.error or {})["type"] == "surefoot.errors.UnsupportedTypeError"
    assert "-> Finding" in msg
    with pytest.raises(RunFailedError, match="tuple"):
        app.start(flow, "wrong", run_id="b").result(timeout=10)


def test_a_forks_copied_steps_and_saga_results_keep_their_types(tmp_path: Path) -> None:
    """Steps a fork copies replay as their declared type, and a compensation gets the
    effect's result as its declared type after a crash."""
    undone: list[Any] = []
    seen: list[Any] = []

    def unbook(p: int, *, result: Point) -> None:
        undone.append(result)

    with App(f"sqlite:///{tmp_path / 'r.db'}", clock=FakeClock(), poll=0.01) as app:

        @app.step(effect=True, compensate=unbook, idempotent=True)
        def book(p: int) -> Point:
            return Point(p, p)

        @app.step
        def check(fail: bool) -> int:
            if fail:
                raise ValueError("no")
            return 0

        @app.workflow
        def flow(fail: bool) -> int:
            pt = book(4)
            seen.append(pt)
            check(fail)
            return pt.x

        assert app.start(flow, False, run_id="ok").result(timeout=10) == 4
        assert app.fork("ok", 2).result(timeout=10) == 4
        app.crash = CrashPlan("before_step", step="2")
        with pytest.raises(RunFailedError):
            _crash_then_resume(app, flow, True, run_id="bad")
    assert [type(x) for x in seen] == [Point] * len(seen) and len(seen) == 4
    assert undone == [Point(4, 4)] and type(undone[0]) is Point


# -- the property: with and without a crash at every step --------------------------------

_scalars = st.one_of(
    st.integers(-(10**6), 10**6),
    st.text(max_size=5),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)
_findings = st.builds(
    Finding,
    st.text(max_size=5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(Color),
    st.datetimes(timezones=st.just(dt.UTC)),
    st.lists(st.text(max_size=3), max_size=2).map(tuple),
)
_points = st.builds(Point, st.integers(-9, 9), st.integers(-9, 9))

# (annotation, values of it): each step of the generated workflow returns one of these
_KINDS: list[tuple[Any, Any]] = [
    (Finding, _findings),
    (Point, _points),
    (Color, st.sampled_from(Color)),
    (Level, st.sampled_from(Level)),
    (dt.datetime, st.datetimes(timezones=st.just(dt.UTC))),
    (dt.timedelta, st.timedeltas(max_value=dt.timedelta(days=9), min_value=dt.timedelta(0))),
    (list[Finding], st.lists(_findings, max_size=2)),
    (dict[Level, Point], st.dictionaries(st.sampled_from(Level), _points, max_size=2)),
    (tuple[int, str], st.tuples(st.integers(-9, 9), st.text(max_size=3))),
    (frozenset[Color], st.frozensets(st.sampled_from(Color))),
    (Finding | None, st.one_of(st.none(), _findings)),
    (Any, _scalars),
]


def _step_fn(ann: Any, i: int, values: list[Any]) -> Any:
    def fn() -> Any:
        return values[i]

    fn.__name__ = f"s{i}"
    fn.__annotations__ = {"return": ann}
    return fn


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_values_are_the_same_with_and_without_a_crash(tmp_path_factory: Any, data: Any) -> None:
    """Whatever supported types the steps return, the values the workflow sees and its
    result are equal and of the same type with no crash and with a crash at every step."""
    kinds = data.draw(st.lists(st.sampled_from(range(len(_KINDS))), min_size=1, max_size=4))
    values = [data.draw(_KINDS[k][1]) for k in kinds]
    base: Path = tmp_path_factory.mktemp("t")

    def run(crash_at: int | None) -> tuple[list[Any], Any]:
        seen: list[Any] = []
        url = f"sqlite:///{base / f'r{crash_at}.db'}"
        with App(url, clock=FakeClock(), poll=0.01) as app:
            steps = [app.step(_step_fn(_KINDS[k][0], i, values)) for i, k in enumerate(kinds)]

            def flow() -> Any:
                out = []
                for s in steps:
                    v = s()
                    seen.append(v)
                    out.append(v)
                return tuple(out)

            flow.__annotations__ = {"return": tuple[tuple(_KINDS[k][0] for k in kinds)]}
            wf = app.workflow(flow)
            if crash_at is not None:
                app.crash = CrashPlan("before_step", step=str(crash_at))
            result = _crash_then_resume(app, wf, run_id="p")
        return seen, result

    def typed(xs: list[Any]) -> list[tuple[Any, Any]]:
        return [(type(x), x) for x in xs]

    want_seen, want = run(None)
    assert typed(want_seen) == typed(values)
    assert typed(list(want)) == typed(values)
    for at in range(1, len(values) + 1):
        seen, result = run(at)
        # the steps before the crash are seen twice (once, then replayed), each the same
        assert typed(seen[: at - 1]) == typed(values[: at - 1])
        assert typed(seen[at - 1 :]) == typed(values)
        assert typed(list(result)) == typed(values)


def test_the_workflow_result_is_the_same_with_and_without_a_crash(tmp_path: Path) -> None:
    """A workflow declaring its result type returns it the same after a crash."""
    with App(f"sqlite:///{tmp_path / 'r.db'}", clock=FakeClock(), poll=0.01) as app:

        @app.step
        def one() -> Finding:
            return _finding(5)

        @app.step
        def two() -> Point:
            return Point(1, 1)

        @app.workflow
        def flow() -> tuple[Finding, Point]:
            return one(), two()

        plain = app.start(flow, run_id="a").result(timeout=10)
        app.crash = CrashPlan("before_step", step="2")
        crashed = _crash_then_resume(app, flow, run_id="b")
    assert plain == crashed == (_finding(5), Point(1, 1))
    assert [type(x) for x in crashed] == [Finding, Point]


def test_an_int_for_a_declared_float_is_a_float_on_every_run(app: App) -> None:
    """A step declared ``-> float`` that returns 3 gives the workflow 3.0 on the first run
    too, as every replay reads it (not an int first and a float after a crash)."""
    seen: list[Any] = []

    @app.step
    def count() -> float:
        return 3

    @app.workflow
    def flow() -> None:
        seen.append(count())

    app.start(flow, run_id="r").result(timeout=10)
    assert seen == [3.0] and type(seen[0]) is float


def test_resolve_refuses_a_result_the_replay_could_not_read(app: App) -> None:
    """app.resolve() with a result that does not fit the step's annotation is refused
    before anything is written; one that fits is read back as the declared type."""
    seen: list[Any] = []

    @app.step(effect=True)
    def book(p: int) -> Point:
        return Point(p, p)

    @app.workflow
    def flow() -> int:
        pt = book(2)
        seen.append(pt)
        return pt.x

    app.crash = CrashPlan("after_effect")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="m").result(timeout=10)
    app.crash = None
    with pytest.raises(RunFailedError):
        app.resume("m").result(timeout=10)
    assert app.show("m").run.status == "needs_attention"
    with pytest.raises(DecodeError, match="Point"):
        app.resolve("m", "1", "booked")
    assert app.show("m").run.status == "needs_attention"
    assert app.resolve("m", "1", [7, 8]).result(timeout=10) == 7
    assert seen == [Point(7, 8)] and type(seen[0]) is Point
