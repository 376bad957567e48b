"""FakeProvider(record=FILE) and `surefoot fake-provider --record FILE`: one JSON line per
request (time, path, model, the step/attempt headers sent, the status returned), written as
it arrives, so a test counts requests per step even across a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from surefoot.testing import DropBeforeReply, FakeProvider, StreamError, rate_limited

MSGS = [{"role": "user", "content": "question 1"}]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_every_request_is_one_json_line_with_its_status(tmp_path: Path) -> None:
    """A 429, a dropped connection, a stream cut by an error and a plain reply: four lines,
    in order, each with the status the client got (none for the dropped one), the model, the
    path, the Idempotency-Key, the SDK's retry counter and the caller's x- headers; no key."""
    log = tmp_path / "requests.jsonl"
    with FakeProvider(record=log) as fp:
        fp.script(rate_limited(retry_after=0), DropBeforeReply(), StreamError(after=1))
        c = openai.OpenAI(base_url=fp.openai_url, api_key="sk-SECRET-1", max_retries=0)
        step = {"Idempotency-Key": "run-1:ask:1", "x-step": "ask", "x-attempt": "1"}
        for kw in ({}, {}, {"stream": True}, {}):
            try:
                out = c.chat.completions.create(model="m1", messages=MSGS, extra_headers=step, **kw)
                if kw:
                    list(out)
            except openai.APIError:
                pass
        c.close()
        assert [r.status for r in fp.received] == [429, None, 200, 200]
    got = lines(log)
    assert [g["status"] for g in got] == [429, None, 200, 200]
    assert [g["fault"] for g in got] == ["429", "drop-before", "stream-error", "ok"]
    assert [g["number"] for g in got] == [1, 2, 3, 4]
    first = got[0]
    assert first["path"] == "/v1/chat/completions" and first["model"] == "m1"
    assert first["api"] == "openai" and first["stream"] is False and got[2]["stream"] is True
    assert first["idempotency_key"] == "run-1:ask:1"
    assert first["headers"] == {"x-step": "ask", "x-attempt": "1"}
    assert first["last_message"] == "question 1"
    assert abs(first["time"] - time.time()) < 60
    assert "sk-SECRET-1" not in log.read_text()


def test_a_record_is_appended_to_so_a_restarted_provider_keeps_counting(tmp_path: Path) -> None:
    """A second provider on the same file adds its lines after the first one's."""
    log = tmp_path / "r.jsonl"
    for _ in range(2):
        with FakeProvider(record=log) as fp:
            c = openai.OpenAI(base_url=fp.openai_url, api_key="k", max_retries=0)
            c.chat.completions.create(model="m", messages=MSGS)
            c.close()
    assert [g["number"] for g in lines(log)] == [1, 1]


def test_the_command_records_each_request_before_a_sigkill(tmp_path: Path) -> None:
    """`surefoot fake-provider --record FILE`: each line is on disk when the reply is, so
    killing the server with SIGKILL loses no line."""
    log = tmp_path / "requests.jsonl"
    cmd = [sys.executable, "-m", "surefoot", "fake-provider", "--record", str(log)]
    with subprocess.Popen(
        [*cmd, "--fault", "503"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split()[-1]
            c = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=5)
            with pytest.raises(openai.InternalServerError):
                c.chat.completions.create(model="m", messages=MSGS)
            c.chat.completions.create(model="m", messages=MSGS)
            c.close()
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert [g["status"] for g in lines(log)] == [503, 200]
