"""A consumer group removed while its worker still runs, on every backend.

``Stream.remove_consumer(name)`` forgets the group's position and deliveries. Its worker's
next fetch is refused with a clear error instead of silently re-creating the group before
the oldest kept message (which redelivered every kept message, acked ones included, and
pinned retention again); ``stream.consumer(name)`` opens it again from the last message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _backends import BACKENDS, backend_url

from surefoot.errors import StateError
from surefoot.statebus import Stream


@pytest.fixture(params=BACKENDS)
def stream(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stream]:
    """A stream keeping at most 3 messages, on each backend."""
    s = Stream(backend_url(str(request.param), tmp_path, request, "rm"), "jobs", max_messages=3)
    yield s
    s.close()


def test_a_removed_groups_worker_is_refused_and_a_reopened_group_starts_at_the_end(
    stream: Stream,
) -> None:
    """5 messages delivered and acked, the group removed: the live worker's fetch raises
    (nothing redelivered, no cursor re-created); re-opened, it gets only new messages."""
    worker = stream.consumer("workers")
    for i in range(5):
        stream.append({"i": i}, message_id=f"m{i}")
    got = worker.fetch(5)
    assert [m.seq for m in got] == [1, 2, 3, 4, 5]
    for m in got:
        worker.ack(m)
    assert stream.remove_consumer("workers")
    with pytest.raises(StateError, match="'workers' was removed from stream 'jobs'"):
        worker.fetch(5)
    assert stream.stats().consumers == ()  # the refused fetch registered nothing
    again = stream.consumer("workers")
    assert again.fetch(5) == [] and worker.fetch(5) == []
    stream.append({"i": 5}, message_id="m5")
    assert [m.seq for m in again.fetch(5)] == [6]
    ((group,),) = [[(c.name, c.position) for c in stream.stats().consumers]]
    assert group == ("workers", 6)


def test_a_new_groups_first_fetch_still_starts_at_the_oldest_kept(stream: Stream) -> None:
    """Never registered before: the group reads every kept message, as before."""
    for i in range(5):
        stream.append({"i": i}, message_id=f"m{i}")
    assert [m.seq for m in stream.consumer("fresh").fetch(5)] == [3, 4, 5]
    assert not stream.remove_consumer("never")
    assert [m.seq for m in stream.consumer("never").fetch(5)] == [3, 4, 5]
