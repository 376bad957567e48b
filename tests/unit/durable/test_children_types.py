"""A child's result reaches its parent as the child workflow's declared type, its error as
its own type, before and after the parent is resumed from its journal."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from surefoot import FakeClock, codec
from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker
from surefoot.errors import RecordedError


@dataclass
class Report:
    """Not registered with the codec: only the annotation can rebuild it."""

    title: str
    pages: int


class QuotaError(Exception):
    """A user error type the codec knows (registered below)."""


class Unknown(Exception):
    """A user error type the codec does not know."""


codec.register(QuotaError)


def test_the_parent_gets_the_childs_declared_type(app: App) -> None:
    """A ``-> Report`` child gives its parent a ``Report``, and ``-> tuple[int, int]`` a
    tuple (a plain JSON decode would give a dict and a list)."""

    @app.workflow
    async def kid(x: int) -> Report:
        return Report("r", x)

    @app.workflow
    def pair() -> tuple[int, int]:
        return (1, 2)

    @app.workflow
    async def parent(x: int) -> str:
        got = await app.child(kid, x)
        both = await app.child(pair)
        return f"{type(got).__name__}:{got.pages}:{type(both).__name__}"

    assert app.start(parent, 4, run_id="p").result(timeout=10) == "Report:4:tuple"


def test_a_resumed_parent_reads_the_childs_type_from_its_journal(
    db_url: str, clock: FakeClock
) -> None:
    """The parent dies after it journalled its child's result; resumed, it replays that
    row and its next step still receives a ``Report``."""
    app = App(db_url, clock=clock, poll=0.01, crash=CrashPlan("before_step", step="tail"))
    seen: list[str] = []

    @app.step
    def tail(r: Report) -> int:
        seen.append(type(r).__name__)
        return r.pages + 1

    @app.workflow
    def kid(x: int) -> Report:
        return Report("r", x)

    @app.workflow
    def parent(x: int) -> int:
        return tail(app.child(kid, x))

    try:
        h = app.enqueue(parent, 2, run_id="p")
        w = Worker(app)
        with pytest.raises(SimulatedCrash):
            for _ in range(500):
                w.run_once(timeout=10)
                time.sleep(0.01)
        assert seen == []  # died before tail ran: the child's row is journalled, done
        assert [s.status for s in app.show("p").steps] == ["done"]
        app.crash = None
        clock.advance(app.lease + 1)
        for _ in range(500):
            if app.handle("p").status() == "succeeded":
                break
            w.run_once(timeout=10)
            time.sleep(0.01)
        assert h.result(timeout=5) == 3
        assert seen == ["Report"]
    finally:
        app.close()


def test_a_childs_error_keeps_its_type_where_the_codec_knows_it(app: App) -> None:
    """A registered error type crosses the boundary as itself; an unknown one as
    ``RecordedError`` naming its type (never a class imported from the data)."""

    @app.workflow
    def over() -> None:
        raise QuotaError("quota spent")

    @app.workflow
    def odd() -> None:
        raise Unknown("no idea")

    @app.workflow
    def parent() -> str:
        out = []
        try:
            app.child(over)
        except QuotaError as exc:
            out.append(f"quota:{exc}")
        try:
            app.child(odd)
        except RecordedError as exc:
            out.append(f"recorded:{exc.type_name.rsplit('.', 1)[-1]}")
        return ",".join(out)

    assert app.start(parent, run_id="p").result(timeout=10) == "quota:quota spent,recorded:Unknown"
