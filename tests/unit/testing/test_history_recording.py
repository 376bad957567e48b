"""surefoot.testing.history: Jepsen-shaped histories, recorded from threads and processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from surefoot.errors import ConfigError
from surefoot.testing.history import History, Op, Recorder


def fake_clock(start: int = 1000) -> object:
    """A nanosecond clock that stands still (the recorder must still order its records)."""
    return lambda: start


def test_client_records_invoke_then_completion_with_process_and_time() -> None:
    """A client's operation is an invoke and an ok on one process, times increasing."""
    rec = Recorder(name="t", clock=fake_clock())  # type: ignore[arg-type]
    c = rec.client()
    c.invoke("write", {"key": "k", "value": 1})
    c.ok({"key": "k", "value": 1, "version": 1})
    h = rec.history()
    assert [(o.type, o.process, o.f) for o in h] == [
        ("invoke", "t/0", "write"),
        ("ok", "t/0", "write"),
    ]
    assert h[1].value["version"] == 1
    assert h[0].time < h[1].time  # a stalled clock still gives strictly increasing times
    assert [o.index for o in h] == [0, 1]


def test_info_moves_the_client_to_a_fresh_process() -> None:
    """After an unknown outcome the client continues under a new process id."""
    rec = Recorder(name="t")
    c = rec.client()
    c.invoke("write", {"key": "k", "value": 1})
    c.info(error="TimeoutError: no reply")
    first = rec.history()[1]
    assert first.type == "info" and first.process == "t/0" and first.error
    c.invoke("read", {"key": "k"})
    assert c.process == "t/1" and rec.history()[2].process == "t/1"


def test_completion_keeps_the_invoked_value_when_given_none() -> None:
    """fail() / info() without a value repeat what was attempted."""
    rec = Recorder()
    c = rec.client()
    c.invoke("write", {"key": "k", "value": 7})
    op = c.fail()
    assert op.value == {"key": "k", "value": 7} and op.type == "fail"


def test_client_refuses_a_second_invoke_or_a_lone_completion() -> None:
    """One operation at a time per client; completing nothing is an error."""
    c = Recorder().client()
    with pytest.raises(ConfigError, match="outstanding"):
        c.ok()
    c.invoke("read", {"key": "k"})
    with pytest.raises(ConfigError, match="is outstanding"):
        c.invoke("read", {"key": "k"})


def test_a_value_that_is_not_json_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    """A set is not JSON data: the record is refused, the file and history stay unchanged."""
    path = tmp_path / "h.jsonl"
    with Recorder(path) as rec:
        c = rec.client()
        with pytest.raises(ConfigError, match="JSON data"):
            c.invoke("write", {"key": "k", "value": {1, 2}})
        assert c.pending is None and len(rec.history()) == 0
    assert path.read_text() == ""


def test_dump_and_load_round_trip(tmp_path: Path) -> None:
    """History.dump writes JSON lines that History.load reads back unchanged."""
    rec = Recorder(name="t")
    c = rec.client()
    c.invoke("txn", [["append", "x", 1], ["r", "x", None]])
    c.ok([["append", "x", 1], ["r", "x", [1]]])
    c.invoke("write", {"key": "k", "value": "a"})
    c.info(error="ConnectionError: reset")
    h = rec.history()
    h.dump(tmp_path / "h.jsonl")
    back = History.load(tmp_path / "h.jsonl")
    assert back.ops == h.ops
    assert json.loads((tmp_path / "h.jsonl").read_text().splitlines()[3])["error"] == (
        "ConnectionError: reset"
    )


def test_load_merges_files_by_time_and_drops_a_torn_last_line(tmp_path: Path) -> None:
    """Two processes' files merge into one real-time order; a line cut by a kill is dropped."""
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text(
        '{"time":10,"type":"invoke","process":"a/0","f":"read","value":{"key":"k"}}\n'
        '{"time":30,"type":"ok","process":"a/0","f":"read","value":{"key":"k","version":0}}\n'
        '{"time":50,"type":"invoke","process":"a/0","f":"re'
    )
    b.write_text(
        '{"time":20,"type":"invoke","process":"b/0","f":"write","value":{"key":"k"}}\n'
        '{"time":40,"type":"ok","process":"b/0","f":"write","value":{"key":"k","version":1}}\n'
    )
    h = History.load(a, b)
    assert [o.time for o in h] == [10, 20, 30, 40]
    assert [o.index for o in h] == [0, 1, 2, 3]
    assert [p.type for p in h.pairs()] == ["ok", "ok"]


def test_loads_uses_line_order_when_times_are_missing() -> None:
    """Hand-written histories need no times: line numbers stand in."""
    h = History.loads(
        '{"type":"invoke","process":0,"f":"read","value":{"key":"k"}}\n'
        "\n"
        '{"type":"ok","process":0,"f":"read","value":{"key":"k","version":0}}\n'
    )
    assert [o.time for o in h] == [1, 3]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('{"type":"ok","process":0,"f":"read"}', "completes nothing"),
        (
            '{"type":"invoke","process":0,"f":"read"}\n{"type":"invoke","process":0,"f":"read"}',
            "was outstanding",
        ),
        (
            '{"type":"invoke","process":0,"f":"read"}\n{"type":"info","process":0,"f":"read"}\n'
            '{"type":"invoke","process":0,"f":"read"}',
            "after an info",
        ),
        (
            '{"type":"invoke","process":0,"f":"read"}\n{"type":"ok","process":0,"f":"write"}',
            "is for 'write'",
        ),
    ],
)
def test_pairs_refuses_a_history_that_breaks_the_discipline(lines: str, message: str) -> None:
    """Completions match invocations one at a time, and an info ends its process."""
    with pytest.raises(ConfigError, match=message):
        History.loads(lines).pairs()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "is not JSON"),
        ('{"type":"done","process":0,"f":"read"}', "type must be one of"),
        ('{"type":"ok","process":true,"f":"read"}', "process must be"),
        ('{"type":"ok","process":0,"f":""}', "f must be"),
        ('{"type":"ok","process":0,"f":"read","time":1.5}', "time must be"),
    ],
)
def test_loads_names_the_line_and_the_problem(line: str, message: str) -> None:
    """A bad record is a ConfigError naming its line."""
    with pytest.raises(ConfigError, match=f"line 1.*{message}|{message}"):
        History.loads(line, name="h.jsonl")


def test_an_unfinished_operation_counts_as_info() -> None:
    """An invoke with no completion at the end of a history is an unknown outcome."""
    h = History([Op("invoke", 0, "write", {"key": "k", "value": 1}, 5)])
    (p,) = h.pairs()
    assert p.type == "info" and p.stop == float("inf") and p.value == {"key": "k", "value": 1}


def test_threads_record_one_sequential_process_each() -> None:
    """Eight threads recording at once leave a well-formed history, 100 operations each."""
    rec = Recorder(name="t")

    def work() -> None:
        c = rec.client()
        for n in range(100):
            c.invoke("write", {"key": "k", "value": f"{c.process}-{n}"})
            c.ok()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h = rec.history()
    pairs = h.pairs()
    assert len(pairs) == 800 and {p.type for p in pairs} == {"ok"}
    assert len({p.process for p in pairs}) == 8
    assert [o.time for o in h] == sorted(o.time for o in h)


CHILD = """
import sys
from surefoot.testing.history import Recorder
with Recorder(sys.argv[1]) as rec:
    c = rec.client()
    for n in range(50):
        c.invoke("write", {"key": "k", "value": f"{c.process}-{n}"})
        c.ok()
"""


def test_processes_on_one_host_merge_into_one_history(tmp_path: Path) -> None:
    """Two OS processes each write their own file; merged by monotonic time they form one
    well-formed history with distinct process ids."""
    paths = [tmp_path / f"h{i}.jsonl" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(p)]) for p in paths]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    h = History.load(*paths)
    pairs = h.pairs()
    assert len(pairs) == 100
    assert len({str(p.process).split("/")[0] for p in pairs}) == 2  # named by OS pid
    assert [o.time for o in h] == sorted(o.time for o in h)
