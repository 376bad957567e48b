"""surefoot.engines.temporal without a server: its URL, the determinism guard, the App hook."""

from __future__ import annotations

import datetime
import random
import time
from typing import Any

import pytest

from surefoot import durable
from surefoot.durable.engine import engine_scheme
from surefoot.engines.temporal import TemporalConfig, parse_url
from surefoot.engines.temporal._guard import guarded
from surefoot.engines.temporal._wire import parse_type, type_name
from surefoot.errors import ConfigError, NondeterminismError


def test_url_defaults_and_options() -> None:
    """A bare URL gets port 7233, namespace default, task queue surefoot; options override."""
    assert parse_url("temporal://10.0.0.5") == TemporalConfig("10.0.0.5:7233")
    got = parse_url(
        "temporal://127.0.0.1:7300?namespace=prod&task_queue=q&step_timeout=30&heartbeat=5&sticky=1"
    )
    assert got == TemporalConfig("127.0.0.1:7300", "prod", "q", 30.0, 5.0, 1.0)
    assert got.url() == "temporal://127.0.0.1:7300?namespace=prod&task_queue=q"


@pytest.mark.parametrize(
    ("url", "names"),
    [
        ("postgresql://x", "temporal://"),
        ("temporal://", "no host"),
        ("temporal://h:notaport", "bad port"),
        ("temporal://h?queue=q", "queue"),
        ("temporal://h?heartbeat=0", "heartbeat"),
        ("temporal://h?step_timeout=soon", "'soon'"),
        ("temporal://h?namespace=", "empty"),
    ],
)
def test_bad_urls_are_refused_with_the_value(url: str, names: str) -> None:
    """Each bad URL is a ConfigError naming what is wrong."""
    with pytest.raises(ConfigError, match=names):
        parse_url(url)


def test_workflow_types_carry_the_version() -> None:
    """One Temporal workflow type per version: name@version, read back (a '@' in a name too)."""
    assert type_name("research", "2") == "research@2"
    assert parse_type("a@b@3") == ("a@b", "3")
    with pytest.raises(ConfigError, match="NAME@VERSION"):
        parse_type("research")


def _report(seen: list[str]) -> Any:
    def report(call: str, hint: str) -> NondeterminismError:
        seen.append(call)
        return NondeterminismError("r-1", "wf", call, hint)

    return report


def clock_user() -> float:
    return time.time()


def random_user() -> float:
    return random.random()


def seeded_user() -> float:
    return random.Random(7).random()


def now_user() -> Any:
    return datetime.datetime.now()


def date_maker() -> Any:
    return datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC).year


def file_user() -> Any:
    return open("/etc/hostname")


def local_import_user() -> float:
    import time as t

    return t.monotonic()


@pytest.mark.parametrize(
    ("fn", "call"),
    [
        (clock_user, "time.time()"),
        (random_user, "random.random()"),
        (now_user, "datetime.now()"),
        (file_user, "open()"),
        (local_import_user, "time.monotonic()"),
    ],
)
def test_the_guard_refuses_clock_random_and_io(fn: Any, call: str) -> None:
    """In a guarded copy each call raises NondeterminismError naming it, and is reported."""
    seen: list[str] = []
    with pytest.raises(NondeterminismError, match=call.replace("(", r"\(").replace(")", r"\)")):
        guarded(fn, _report(seen))()
    assert seen == [call]


def test_the_guard_lets_deterministic_code_through() -> None:
    """A seeded Random, building a datetime, and the original function itself all still work."""
    seen: list[str] = []
    assert guarded(seeded_user, _report(seen))() == random.Random(7).random()
    assert guarded(date_maker, _report(seen))() == 2026
    assert seen == []
    assert isinstance(clock_user(), float)  # the original is untouched


def test_an_engine_url_has_no_journal() -> None:
    """An app on temporal:// refuses journal calls with a message saying where its runs live."""
    assert engine_scheme("temporal://h:1") == "temporal"
    assert engine_scheme("sqlite:///x.db") is None
    app = durable.App("temporal://127.0.0.1:1?task_queue=t")
    with pytest.raises(ConfigError, match="runs on an engine"):
        app.journal  # noqa: B018
    app.close()


def test_an_unreachable_cluster_is_one_clear_error(temporal_bin: str) -> None:
    """app.start on a temporal:// URL nobody answers names the address and what to do."""
    from surefoot.errors import StoreUnavailableError

    app = durable.App("temporal://127.0.0.1:1?task_queue=t")

    @app.workflow
    async def nothing() -> None:
        return None

    try:
        with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1:1") as info:
            app.enqueue(nothing, run_id="x")
        assert "start one" in str(info.value)
    finally:
        app.close()
