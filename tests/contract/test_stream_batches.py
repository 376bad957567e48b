"""StreamBatches contract (``append_many``, ``delete``): memory, SQLite and PostgreSQL.

The durable token streams write a step's events in batches through these two methods; a
batch is one commit, sent again after a lost reply it appends nothing twice, and a pruned
run's stream is deleted whole.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _backends import backend_url

from surefoot import storage
from surefoot.errors import DuplicateMessageError
from surefoot.storage.streams import StreamBatches


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    st = storage.open(backend_url(request.param, tmp_path, request, "batches"))
    try:
        yield st.stream(f"s-{uuid.uuid4().hex[:10]}")
    finally:
        st.close()


def test_a_batch_appends_in_order_with_consecutive_seqs(log: Any) -> None:
    assert isinstance(log, StreamBatches)
    log.append("before", "x", now=1.0)
    recs = log.append_many([(f"m{i}", f"p{i}") for i in range(5)], now=2.0)
    assert [r.seq for r in recs] == [2, 3, 4, 5, 6]
    assert [r.payload for r in log.range(0, 100)] == ["x", "p0", "p1", "p2", "p3", "p4"]
    assert not any(r.duplicate for r in recs)


def test_a_batch_sent_again_appends_nothing_twice(log: Any) -> None:
    items = [("a", "1"), ("b", "2")]
    log.append_many(items, now=1.0)
    again = log.append_many([*items, ("c", "3")], now=2.0)
    assert [(r.seq, r.duplicate) for r in again] == [(1, True), (2, True), (3, False)]
    assert log.last_seq() == 3


def test_a_reused_id_with_another_payload_keeps_nothing_of_the_batch(log: Any) -> None:
    log.append_many([("a", "1")], now=1.0)
    with pytest.raises(DuplicateMessageError):
        log.append_many([("new", "x"), ("a", "other")], now=2.0)
    assert [r.message_id for r in log.range(0, 10)] == ["a"]


def test_delete_removes_the_whole_stream(log: Any) -> None:
    log.append_many([("a", "1"), ("b", "2")], now=1.0)
    assert log.delete() == 2
    assert log.range(0, 10) == []
    assert log.delete() == 0
    assert log.append_many([("a", "other")], now=3.0)[0].duplicate is False
