"""A watch's wake-up costs one read on the network backends: on PostgreSQL the notification
(its payload names the namespace) is the wake-up and one statement reads the changes, the
revision, the compaction mark and whether expiries are due; on Redis the blocking ``XREAD``
is the wake-up and one ``MULTI`` reads the rest. Counted in the client, not timed."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import backend_url

from surefoot.statebus import Store

#: Round trips of the watching client per change delivered: PostgreSQL the one read (the
#: LISTEN connection only receives), Redis the blocking XREAD and the one read.
PER_CHANGE = {"postgresql": 1, "redis": 2}


@pytest.mark.parametrize("kind", sorted(PER_CHANGE))
def test_a_watch_wake_up_costs_one_read(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Ten changes committed by another Store, each waited for: the watcher's client sent
    exactly the counted round trips per change (before this change: 95 and 51 for the ten)."""
    url = backend_url(kind, tmp_path, request, "rt")
    ns = f"rt-{uuid.uuid4().hex}"
    watcher, writer = Store(url, ns), Store(url, ns)
    delivered: queue.Queue[Any] = queue.Queue()

    def watch() -> None:
        for c in watcher.watch("k", poll=30, timeout=30):
            delivered.put(c.value)
            if c.value == 10:
                return

    t = threading.Thread(target=watch)
    t.start()
    writer.write("k", 0)  # the first one connects (LISTEN) and reads from the start
    assert delivered.get(timeout=10) == 0
    time.sleep(0.2)  # back in its wait
    before = watcher.storage.db.round_trips
    for i in range(1, 11):
        # with a key of another prefix, in the same commit (one notification), not delivered
        writer.txn({}, [("put", "other", i), ("put", "k", i)])
        assert delivered.get(timeout=10) == i
    t.join(10)
    spent = watcher.storage.db.round_trips - before
    watcher.close()
    writer.close()
    assert spent == 10 * PER_CHANGE[kind]
