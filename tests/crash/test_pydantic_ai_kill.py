"""A PydanticAI agent on surefoot survives a real SIGKILL of its worker at every operation
boundary: in a model request, in a tool, after a tool's effect, while waiting for approval.

The agent (tests/crash/pydantic_ai_app.py) runs in ``surefoot worker`` processes on SQLite
and PostgreSQL; its model is PydanticAI's FunctionModel, and the model and the tools write
every call they receive to a ledger file outside the journal. After the kill a worker with
the same id takes the run back; at the end, per kill point: 0 repeated model requests among
those journalled before the kill, 0 repeated tool calls among those journalled, the effect
applied once under one key, the publish (approved) made once, and the run's usage counting
each journalled request once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
    import pydantic_ai.durable_exec  # noqa: F401 - CI installs surefoot[pydantic-ai]
pytest.importorskip("pydantic_ai.durable_exec", reason="surefoot[pydantic-ai] is not installed")

from surefoot import storage
from surefoot.integrations.pydantic_ai import approve, pending_approvals

pytestmark = [pytest.mark.crash, pytest.mark.slow]

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pydantic_ai_app", HERE / "pydantic_ai_app.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    u = f"{request.getfixturevalue('pg_url')}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    yield u
    st: Any = storage.open(u)
    st.db.drop_schema()
    st.close()


class Worker:
    """One ``surefoot worker`` process at a time, id ``w1``; stopped by its pid at the end."""

    def __init__(self, url: str, ledger: Path) -> None:
        self.url, self.ledger = url, ledger
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, hang: str = "") -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE), str(SRC)]),
            "SF_PAI_DB": self.url,
            "SF_PAI_LEDGER": str(self.ledger),
            "SF_PAI_HANG": hang,
        }
        env.pop("SUREFOOT_CRASH", None)
        cmd = [sys.executable, "-m", "surefoot", "worker", "--db", self.url]
        cmd += ["--app", "pydantic_ai_app:app", "--worker-id", "w1", "--lease", "5"]
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def _until(what: str, check: Any, worker: Worker, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert worker.proc is None or worker.proc.poll() is None, f"the worker died before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("point", ["model:1", "tool:Rome", "after_effect", "approval"])
def test_sigkill_at_each_boundary_repeats_nothing_completed(
    url: str, point: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    mod = _load()
    app, trip = mod.build(url, ledger)
    worker = Worker(url, ledger)
    try:
        app.enqueue(trip, "plan a trip to Paris", run_id="t1")
        worker.start(hang="" if point == "approval" else point)
        if point == "approval":
            _until("the approval wait", lambda: pending_approvals(app, "t1"), worker)
            _until("the run to sleep", lambda: app.show("t1").run.status == "sleeping", worker)
        else:
            hung = lambda: any(e.get("at") == point for e in mod.read_ledger(ledger))  # noqa: E731
            _until(f"the worker to hang at {point}", hung, worker)
        worker.kill()
        before = [s for s in app.show("t1").steps if s.status == "done"]  # journalled by then

        worker.start()  # the same worker id: it takes the run back at once
        if point == "approval":  # decided while no worker ran; queued for the run
            (waiting,) = pending_approvals(app, "t1")
            assert approve(app, "t1", waiting.digest, by="ann")
        else:
            waiting = _until("the approval request", lambda: pending_approvals(app, "t1"), worker)
            assert approve(app, "t1", waiting[0].digest, by="ann")
        result = app.handle("t1").result(timeout=120)
    finally:
        worker.stop()
        app.close()

    events = mod.read_ledger(ledger)
    turns = Counter(e["turn"] for e in events if e["ev"] == "model")
    journalled_turns = sum(1 for s in before if s.name == "trip__model.request")
    assert sorted(turns) == [0, 1, 2, 3]
    repeated = sum(turns[t] - 1 for t in range(journalled_turns))
    assert repeated == 0, (point, turns, journalled_turns)
    in_flight = {"model:1": {1: 2}}.get(point, {})  # the request killed in flight ran again
    assert dict(turns) == {0: 1, 1: 1, 2: 1, 3: 1} | in_flight

    lookups = Counter(e["city"] for e in events if e.get("tool") == "lookup")
    journalled = {
        "Paris" if "Paris" in str(s.result) else "Rome"
        for s in before
        if s.name.endswith("call_tool:lookup")
    }
    for city in ("Paris", "Rome"):
        if city in journalled:  # journalled before the kill: never ran again
            assert lookups[city] == 1, (point, city, lookups)
        else:  # in flight at the kill (its result not committed): ran again, at most once
            assert lookups[city] in (1, 2), (point, city, lookups)
    if point == "tool:Rome":
        assert "Rome" not in journalled and lookups["Rome"] == 2  # hung until the kill
    else:
        assert journalled == {"Paris", "Rome"}

    applied = [e["key"] for e in events if e["ev"] == "effect_applied"]
    requested = [e["key"] for e in events if e["ev"] == "effect_request"]
    assert applied == ["t1:b1"]  # one effect, under the run's and the call's key
    assert requested == ["t1:b1"] * (2 if point == "after_effect" else 1)
    assert [e["text"] for e in events if e.get("tool") == "publish"] == ["trip to Paris"]

    assert result["output"] == "booked and published"
    assert result["requests"] == 4  # usage counts each journalled request once
    assert result["input_tokens"] > 0


OPENAI_APP = HERE / "pydantic_ai_openai_app.py"


def test_sigkill_in_a_request_through_the_openai_sdk_pays_each_completed_request_once(
    tmp_path: Path,
) -> None:
    """The model behind the real OpenAI SDK is surefoot's FakeProvider on loopback. Killed
    (SIGKILL) while turn 2's request is in flight, the rerun asks turn 2 and 3 only: turn 1,
    answered and journalled, is paid once, counted at the provider."""
    from surefoot.testing import FakeProvider, Reply

    def child(db: str, url: str) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(SRC)])}
        env.pop("SUREFOOT_CRASH", None)
        return subprocess.Popen(
            [sys.executable, str(OPENAI_APP), db, url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def asked(fp: FakeProvider) -> list[str]:
        return [r.messages[-1]["content"] for r in fp.received]

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeProvider() as fp:
        fp.script(Reply(), Reply(delay=120))  # turn 2's request hangs until the kill
        first = child(db, fp.openai_url)
        with first:
            deadline = time.monotonic() + 120
            while fp.count() < 2:
                assert first.poll() is None, first.communicate()
                assert time.monotonic() < deadline, "the run never sent its second request"
                time.sleep(0.05)
            first.kill()
            first.wait(timeout=10)
        assert fp.answered == [1]

        second = child(db, fp.openai_url)
        with second:
            out, err = second.communicate(timeout=180)
        assert second.returncode == 0, err[-3000:]
        result = json.loads(out)
        answered = [fp.received[n - 1].messages[-1]["content"] for n in fp.answered]
        assert asked(fp) == ["question 1", "question 2", "question 2", "question 3"]
        assert sorted(answered) == ["question 1", "question 2", "question 3"]  # each paid once
        assert [r.retry_count for r in fp.received] == [0, 0, 0, 0]  # no SDK retries
    assert len(result["outputs"]) == 3
    # usage across the boundary: the rerun, which did not make turn 1's request, counts it
    assert result["requests"] == 3
    assert result["output_tokens"] > 0
