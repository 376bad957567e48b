"""Durable token streams across a SIGKILL of the worker and a reconnect of the reader.

A run of three streamed model calls (the real OpenAI SDK against the FakeProvider, paced at
200 tokens/s) is killed with SIGKILL while step 2 is at one of four points (on SQLite; on
PostgreSQL, and with an async step streaming through ``astream``, for two of them): before
its stream (the request hangs), during it (after the reader saw 10 of its tokens), after it
(the stream ended, the step is not journalled) and after its result was journalled. A
second worker process resumes the run. A reader follows the run live, drops its connection
at the kill and resumes from its last offset. Then, for every kill point:

* the reader saw every offset exactly once, in order (nothing lost, nothing twice);
* each step's text of its final attempt equals the step's journalled result;
* step 2's new attempt, where an earlier one had streamed, came after a ``retry`` event.

And the reader's side: ``surefoot runs follow --json`` SIGKILLed mid-stream, a new one
started with ``--after`` its last printed offset: every offset once, in order.

And a zombie: a worker SIGSTOPped mid-stream, taken over, then resumed, writes its old
attempt's tokens after the new attempt's marker; readers drop them (the test fails when
they do not).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from surefoot import durable, storage
from surefoot.durable import RunStream, StreamEvent, step_texts
from surefoot.testing import FakeProvider, Reply

pytestmark = pytest.mark.crash

APP = Path(__file__).parent / "stream_crash_app.py"
RUN = "stream-run-1"
WORDS = 40  # tokens (words) per reply


def _responder(api: str, messages: list[Any]) -> str:
    q = str(messages[-1]["content"]).split()[-1]
    return " ".join(f"q{q}-w{i}" for i in range(WORDS))


def _worker(db: str, url: str, hold: str | None = None, **extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(APP.parent), **extra}
    env.pop("SF_HOLD_AFTER", None)
    if hold is not None:
        env["SF_HOLD_AFTER"] = hold
    return subprocess.Popen(
        [sys.executable, str(APP), db, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


class Reader:
    """Follows the run in a thread, from its own App (another 'process' of the reader)."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.events: list[StreamEvent] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, after: int) -> None:
        self.stop.clear()
        self.thread = threading.Thread(target=self._follow, args=(after,), daemon=True)
        self.thread.start()

    def _follow(self, after: int) -> None:
        app = durable.App(self.db, poll=0.02, create=False)
        try:
            while not self.stop.is_set():  # the run may not exist yet
                try:
                    stream = app.handle(RUN).stream(after=after, timeout=0.2)
                except Exception:
                    time.sleep(0.02)
                    continue
                for ev in stream:
                    with self.lock:
                        self.events.append(ev)
                    after = ev.offset
                    if self.stop.is_set():
                        return  # the connection drops here
                if app.handle(RUN).status() == "succeeded":
                    return
        finally:
            app.close()

    def disconnect(self) -> int:
        """Drop the connection; the last offset handled (to resume from)."""
        self.stop.set()
        assert self.thread is not None
        self.thread.join(timeout=10)
        with self.lock:
            return self.events[-1].offset if self.events else 0

    def count(self, pos: str, kind: str = "token") -> int:
        with self.lock:
            return sum(1 for e in self.events if e.pos == pos and e.kind == kind)


def _until(cond: Any, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 60
    while not cond():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _drop_schema(url: str) -> None:
    st: Any = storage.open(url)
    st.db.drop_schema()
    st.close()


def _journalled(db: str) -> dict[str, Any]:
    with durable.App(db, create=False) as app:
        if not app.list_runs():
            return {}
        return {s.pos: s.result for s in app.show(RUN).steps if s.status == "done"}


@pytest.mark.parametrize(
    ("backend", "point", "mode"),
    [
        *[("sqlite", p, "sync") for p in ("before", "during", "after", "journalled")],
        ("sqlite", "during", "async"),
        ("sqlite", "after", "async"),
        ("postgresql", "during", "sync"),
        ("postgresql", "after", "sync"),
    ],
)
def test_a_reader_sees_the_final_attempt_once_across_a_worker_kill(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, point: str, mode: str
) -> None:
    if backend == "sqlite":
        db = f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        db = f"{request.getfixturevalue('pg_url')}?schema=sf_t_{uuid.uuid4().hex[:12]}"
        request.addfinalizer(lambda: _drop_schema(db))
    with durable.App(db) as made:
        assert made.journal is not None  # the journal exists before the reader opens it
    with FakeProvider(responder=_responder, tokens_per_second=200) as fp:
        if point == "before":
            fp.script(Reply(), Reply(delay=60))  # step 2's request hangs until the kill
        reader = Reader(db)
        reader.start(0)
        flags = {"SF_ASYNC": "1" if mode == "async" else "0"}
        first = _worker(db, fp.openai_url, hold="2" if point == "after" else None, **flags)
        with first:
            if point == "before":
                _until(lambda: fp.count() == 2, first, "step 2's request")
            elif point == "during":
                _until(lambda: reader.count("2") >= 10, first, "10 tokens of step 2")
            elif point == "after":
                _until(lambda: reader.count("2") == WORDS, first, "step 2's whole stream")
            else:
                _until(lambda: "2" in _journalled(db), first, "step 2 journalled")
            first.kill()  # SIGKILL: no cleanup, no flush
            first.wait(timeout=10)
        last = reader.disconnect()
        before_kill = reader.count("2")
        reader.start(last)  # the reader reconnects from its last offset
        second = _worker(db, fp.openai_url, **flags)
        with second:
            out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        reader.thread.join(timeout=30)  # type: ignore[union-attr]
        result = json.loads(out)
    events = reader.events
    assert [e.offset for e in events] == list(range(1, len(events) + 1))  # each once, in order
    journalled = _journalled(db)
    assert [journalled[p] for p in ("1", "2", "3")] == result
    assert step_texts(events) == journalled
    step2 = [e for e in events if e.pos == "2"]
    retried = point in ("during", "after")
    assert before_kill > 0 if retried else True
    assert [e.kind for e in step2].count("retry") == (1 if retried else 0)
    if retried:  # the final attempt's tokens all come after its marker
        at = next(i for i, e in enumerate(step2) if e.kind == "retry")
        final = [e.data for e in step2[at:] if e.kind == "token"]
        assert "".join(final) == journalled["2"]
        assert all(e.epoch > step2[0].epoch for e in step2[at:])


def _follower(db: str, after: int) -> subprocess.Popen[str]:
    cmd = ["-m", "surefoot", "runs", "follow", RUN, "--db", db, "--json", "--after", str(after)]
    return subprocess.Popen(
        [sys.executable, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_reader_process_killed_mid_stream_resumes_from_its_last_offset(tmp_path: Path) -> None:
    """`surefoot runs follow --json` is SIGKILLed after 15 events; a new one started with
    --after the last offset it printed completes the stream: every offset once, in order."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with durable.App(db) as made:
        assert made.journal is not None
    with FakeProvider(responder=_responder, tokens_per_second=60) as fp:
        worker = _worker(db, fp.openai_url)
        with worker:
            with durable.App(db, create=False) as look:
                _until(lambda: bool(look.list_runs()), worker, "the run to exist")
            first = _follower(db, 0)
            lines: list[str] = []
            assert first.stdout is not None
            while len(lines) < 15:
                line = first.stdout.readline()
                assert line, first.communicate()
                lines.append(line)
            first.kill()  # SIGKILL: the reader dies mid-stream
            first.communicate(timeout=10)  # reaped, its pipes closed
            seen = [json.loads(x) for x in lines]
            second = _follower(db, seen[-1]["offset"])
            out, err = second.communicate(timeout=120)
            assert second.returncode == 0, err
            assert worker.wait(timeout=120) == 0
    seen += [json.loads(x) for x in out.splitlines()]
    assert [e["offset"] for e in seen] == list(range(1, len(seen) + 1))
    assert sum(e["kind"] == "token" for e in seen) == 3 * WORDS
    texts: dict[str, str] = {}
    for e in seen:
        if e["kind"] == "token":
            texts[e["pos"]] = texts.get(e["pos"], "") + e["data"]
    assert texts == _journalled(db)


def test_a_stopped_worker_that_wakes_after_a_takeover_cannot_spoil_the_text(
    tmp_path: Path,
) -> None:
    """Worker A is SIGSTOPped mid-stream of step 2; B takes the run over when A's lease
    expires and streams step 2 again (epoch 2, after a ``retry`` marker); then A is resumed
    and writes the tokens it had buffered (epoch 1) after B's marker. The stream keeps them
    (writes are not fenced), the reader drops them, and each step's text is its journalled
    result; A's own step write is refused. The reader reconnects every 0.2 s (its
    ``timeout``): one that resumed after B's marker drops A's late tokens too (before the
    fix it kept them, and B's text came out with A's tail inside it: 3 runs of 10)."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with durable.App(db) as made:
        assert made.journal is not None
    with FakeProvider(responder=_responder, tokens_per_second=100) as fp:
        reader = Reader(db)
        reader.start(0)
        a = _worker(db, fp.openai_url, SF_WORKER_ID="worker-a", SF_LEASE="2")
        b: subprocess.Popen[str] | None = None
        try:
            _until(lambda: reader.count("2") >= 10, a, "10 tokens of step 2 from A")
            a.send_signal(signal.SIGSTOP)
            b = _worker(db, fp.openai_url, SF_WORKER_ID="worker-b", SF_LEASE="2")
            _until(lambda: reader.count("2", "retry") == 1, b, "B's retry marker")
            _until(
                lambda: sum(1 for e in list(reader.events) if e.pos == "2" and e.epoch > 1) >= 5,
                b,
                "5 events of B's attempt",
            )
            a.send_signal(signal.SIGCONT)
            out, err = b.communicate(timeout=120)
            assert b.returncode == 0, err
            a.communicate(timeout=120)  # A notices its lease is gone and stops
        finally:
            for p in (a, b):
                if p is not None and p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                    p.communicate()
        reader.thread.join(timeout=30)  # type: ignore[union-attr]
    journalled = _journalled(db)
    assert [journalled[p] for p in ("1", "2", "3")] == json.loads(out)
    assert step_texts(reader.events) == journalled
    with durable.App(db, create=False) as look:
        raw = list(RunStream(look.tokens.log(RUN), lambda: "succeeded", RUN))
        stored = [json.loads(r.payload) for r in look.tokens.log(RUN).range(0, 10_000)]
    marker = next(i for i, e in enumerate(stored) if e["kind"] == "retry")
    late = [e for e in stored[marker:] if e["pos"] == "2" and e["epoch"] == 1]
    assert late, "A wrote nothing after B's marker: the case was not exercised"
    assert all(e.epoch > 1 for e in raw if e.pos == "2" and e.offset > marker + 1)
