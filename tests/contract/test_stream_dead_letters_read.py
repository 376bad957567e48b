"""``Stream.dead_letters(group)`` reads a group's dead letters without registering anything,
on every backend (the run inspector looks at groups this way)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _backends import BACKENDS, backend_url

from surefoot.statebus import Stream


@pytest.fixture(params=BACKENDS)
def stream(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stream]:
    s = Stream(backend_url(str(request.param), tmp_path, request, "dlr"), "jobs")
    yield s
    s.close()


def test_dead_letters_read_through_the_stream_match_the_consumer_and_register_nothing(
    stream: Stream,
) -> None:
    workers = stream.consumer("workers", max_attempts=1)
    stream.append({"job": 1}, message_id="j1")
    stream.append({"job": 2}, message_id="j2")
    for m in workers.fetch(2):
        workers.reject(m, reason=f"bad {m.message_id}")
    before = stream.stats()

    seen = stream.dead_letters("workers")
    assert [(d.message_id, d.reason) for d in seen] == [("j1", "bad j1"), ("j2", "bad j2")]
    assert [d.payload for d in seen] == [{"job": 1}, {"job": 2}]
    assert seen == workers.dead_letters()
    assert stream.dead_letters("ghost") == []  # a group the stream does not have: none

    after = stream.stats()
    assert [c.name for c in after.consumers] == ["workers"]  # no "ghost" group created
    assert after == before
