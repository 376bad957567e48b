"""check_queue: streams lose nothing acknowledged, invent nothing, keep order; each anomaly
has a hand-made history that must be flagged, and a real SQLite stream passes."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from surefoot.statebus import Stream
from surefoot.testing.checkers import check_queue
from surefoot.testing.history import (
    History,
    Recorder,
    record_ack,
    record_dead_letters,
    record_fetch,
    record_stream_append,
)


def op(kind: str, p: Any, f: str, **value: Any) -> str:
    return json.dumps({"type": kind, "process": p, "f": f, "value": {"stream": "s", **value}})


def append(
    p: Any, mid: str, seq: int | None, *, kind: str = "ok", payload: Any = None
) -> list[str]:
    """An append invoked and completed (``seq`` on ok)."""
    payload = payload if payload is not None else {"n": mid}
    done = {"id": mid, "payload": payload}
    if kind == "ok":
        done |= {"seq": seq, "duplicate": False}
    return [op("invoke", p, "append", id=mid, payload=payload), op(kind, p, "append", **done)]


def fetch(p: Any, *msgs: tuple[int, str], group: str = "g") -> list[str]:
    got = [{"seq": s, "id": m, "payload": {"n": m}, "attempt": 1} for s, m in msgs]
    return [op("invoke", p, "fetch", group=group), op("ok", p, "fetch", group=group, messages=got)]


def ack(p: Any, seq: int, group: str = "g") -> list[str]:
    return [
        op("invoke", p, "ack", group=group, seq=seq),
        op("ok", p, "ack", group=group, seq=seq, acked=True),
    ]


def dead(p: Any, *msgs: tuple[int, str], group: str = "g") -> list[str]:
    got = [{"seq": s, "id": m, "reason": "max_attempts"} for s, m in msgs]
    return [
        op("invoke", p, "dead-letters", group=group),
        op("ok", p, "dead-letters", group=group, messages=got),
    ]


def H(*parts: list[str]) -> History:
    return History.loads("\n".join(line for part in parts for line in part))


def test_a_drained_stream_with_redeliveries_and_dead_letters_passes() -> None:
    """Appends delivered (one twice before its ack), one dead-lettered, a retried append
    deduplicated, an unknown append never delivered: valid, with the counts."""
    retry = [
        op("invoke", 0, "append", id="a", payload={"n": "a"}),
        op("ok", 0, "append", id="a", payload={"n": "a"}, seq=1, duplicate=True),
    ]
    h = H(
        append(0, "a", 1),
        retry,
        append(0, "b", 2),
        append(0, "c", None, kind="info"),
        fetch(1, (1, "a"), (2, "b")),
        fetch(1, (1, "a")),  # visibility timeout passed: at-least-once delivery
        ack(1, 1),
        dead(1, (2, "b")),
    )
    res = check_queue(h)
    assert res.valid, res
    assert res.stats["redeliveries"] == 1 and res.stats["dead_letters"] == 1
    assert res.stats["info_not_delivered"] == 1


def test_an_unknown_append_that_was_delivered_happened() -> None:
    """An info append whose message is delivered is fine, and counted as delivered."""
    res = check_queue(H(append(0, "a", None, kind="info"), fetch(1, (1, "a"))))
    assert res.valid and res.stats["info_delivered"] == 1


CASES = [
    ("lost", [append(0, "a", 1), fetch(1), dead(1)]),
    ("invented", [fetch(1, (1, "zz"))]),
    ("invented", [append(0, "a", 1, payload={"n": "other"}), fetch(1, (1, "a"))]),
    ("failed-append-delivered", [append(0, "a", None, kind="fail"), fetch(1, (1, "a"))]),
    ("duplicate-message", [append(0, "a", 1), fetch(1, (1, "a"), (2, "a"))]),
    ("seq-reused", [append(0, "a", 1), append(0, "b", 1), fetch(1, (1, "a"))]),
    ("append-order", [append(0, "a", 2), append(0, "b", 1), fetch(1, (1, "b"), (2, "a"))]),
    (
        "delivery-order",
        [append(0, "a", 1), append(0, "b", 2), fetch(1, (2, "b")), fetch(1, (1, "a"))],
    ),
    ("delivery-order", [append(0, "a", 1), append(0, "b", 2), fetch(1, (2, "b"), (1, "a"))]),
    (
        "redelivered-after-ack",
        [append(0, "a", 1), fetch(1, (1, "a")), ack(1, 1), fetch(1, (1, "a"))],
    ),
]


@pytest.mark.parametrize(
    ("kind", "parts"), CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)]
)
def test_each_anomaly_is_flagged(kind: str, parts: list[list[str]]) -> None:
    """The hand-made history of each anomaly is invalid with that kind named."""
    res = check_queue(H(*parts))
    assert kind in res.kinds(), res
    assert next(a for a in res.anomalies if a.kind == kind).key == "s"


def test_every_group_must_get_every_message() -> None:
    """A message delivered to one group but not another is lost for the other."""
    res = check_queue(H(append(0, "a", 1), fetch(1, (1, "a"), group="g1"), fetch(2, group="g2")))
    assert res.kinds() == {"lost": 1}
    assert "group 'g2'" in res.anomalies[0].explanation


def test_a_sqlite_stream_drained_by_two_workers_passes(tmp_path: Path) -> None:
    """A producer (retrying some appends with the same id) and two workers of one group,
    rejecting every tenth message, recorded on a SQLite stream: nothing lost or invented."""
    url = f"sqlite:///{tmp_path / 'q.db'}"
    rec = Recorder(name="q")
    producer = Stream(url, "jobs")
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(n: int) -> None:
        stream = Stream(url, "jobs")
        group = stream.consumer("g", visibility_timeout=30)
        c = rec.client()
        try:
            while True:
                _, got = record_fetch(c, group, 5, worker=f"w{n}", block=0.05)
                if not got and stop.is_set():
                    return
                for m in got:
                    if m.payload["n"] % 10 == 0:
                        group.reject(m, "poison")
                    else:
                        record_ack(c, group, m)
        except BaseException as exc:
            errors.append(exc)
        finally:
            stream.close()

    producer.consumer("g")  # registered before the first append
    workers = [threading.Thread(target=work, args=(n,)) for n in range(2)]
    for th in workers:
        th.start()
    c = rec.client()
    for n in range(60):
        record_stream_append(c, producer, {"n": n}, message_id=f"m{n}")
        if n % 7 == 0:  # a producer retry: deduplicated
            record_stream_append(c, producer, {"n": n}, message_id=f"m{n}")
    stop.set()
    for th in workers:
        th.join()
    record_dead_letters(c, producer.consumer("g"))
    producer.close()
    assert not errors, errors
    res = check_queue(rec.history())
    assert res.valid, res
    assert res.stats["appends_ok"] == 69 and res.stats["dead_letters"] == 6
    assert res.stats["deliveries"] == 60


def test_a_redelivery_after_an_unseen_fetch_is_not_an_order_violation() -> None:
    """Found by the §1 campaign on SQLite: a worker killed inside a fetch took seq 1 (the
    fetch never completed), a later fetch got seq 2, and after the visibility timeout seq 1
    came back as attempt 2. A redelivery is not a new message, so order is not violated;
    the same seq 1 as attempt 1 after seq 2 still is."""
    lost_fetch = [op("invoke", 9, "fetch", group="g")]  # killed: no completion
    again = [
        op("invoke", 2, "fetch", group="g"),
        op(
            "ok",
            2,
            "fetch",
            group="g",
            messages=[{"seq": 1, "id": "a", "payload": {"n": "a"}, "attempt": 2}],
        ),
    ]
    h = H(append(0, "a", 1), append(0, "b", 2), lost_fetch, fetch(1, (2, "b")), again)
    assert check_queue(h).valid, check_queue(h).report()
    h = H(append(0, "a", 1), append(0, "b", 2), lost_fetch, fetch(1, (2, "b")), fetch(2, (1, "a")))
    assert check_queue(h).kinds() == {"delivery-order": 1}
