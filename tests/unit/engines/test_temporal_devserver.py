"""surefoot.engines.temporal: finding the CLI, the dev server on loopback, stopping it by pid."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import uuid
from pathlib import Path

import pytest

from surefoot.engines.temporal import EXTRA, DevServer, find_temporal_binary, free_port
from surefoot.errors import ConfigError, MissingExtraError, StoreUnavailableError


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_missing_binary_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no `temporal` next to the interpreter or on PATH, the error names surefoot[temporal]."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MissingExtraError, match=r"surefoot\[temporal\]") as info:
        find_temporal_binary()
    assert info.value.extra == EXTRA == "temporal"
    assert str(tmp_path) in str(info.value)
    with pytest.raises(MissingExtraError):
        DevServer(tmp_path / "t.db")


def test_binary_next_to_the_interpreter_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI next to sys.executable is used before one on PATH."""
    venv, other = tmp_path / "venv", tmp_path / "other"
    venv.mkdir()
    other.mkdir()
    mine = _script(venv / "temporal", "exit 0")
    _script(other / "temporal", "exit 0")
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    monkeypatch.setenv("PATH", str(other))
    assert find_temporal_binary() == str(mine)
    mine.unlink()
    assert find_temporal_binary() == str(other / "temporal")


def test_only_loopback_and_sane_timeouts(tmp_path: Path) -> None:
    """A non-loopback host or a non-positive ready timeout is refused with the value named."""
    fake = str(_script(tmp_path / "temporal", "exit 0"))
    for host in ("0.0.0.0", "10.1.2.3", "example.org"):
        with pytest.raises(ConfigError, match=repr(host)):
            DevServer(tmp_path / "t.db", host=host, binary=fake)
    with pytest.raises(ConfigError, match="ready_timeout"):
        DevServer(tmp_path / "t.db", binary=fake, ready_timeout=0)


def test_command_line_is_headless_loopback_wal(tmp_path: Path) -> None:
    """The server is started headless on 127.0.0.1, on its ports, its file and WAL."""
    fake = str(_script(tmp_path / "temporal", "exit 0"))
    s = DevServer(tmp_path / "t.db", binary=fake, port=7001, http_port=7002, metrics_port=7003)
    argv = s.argv()
    assert argv[:3] == [fake, "server", "start-dev"]
    pairs = {flag: argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag != "--headless"}
    assert pairs["--ip"] == "127.0.0.1" and pairs["--port"] == "7001"
    assert pairs["--http-port"] == "7002" and pairs["--metrics-port"] == "7003"
    assert pairs["--db-filename"] == str(tmp_path / "t.db")
    assert "--headless" in argv and "journal_mode=wal" in argv
    assert s.address == "127.0.0.1:7001" and s.log == str(tmp_path / "t.db") + ".log"
    ui = DevServer(None, binary=fake, ui_port=7004).argv()
    assert "--headless" not in ui and "--db-filename" not in ui and "7004" in ui


def test_server_that_exits_reports_its_log(tmp_path: Path) -> None:
    """A binary that exits at once gives StoreUnavailableError with its status and output."""
    fake = str(_script(tmp_path / "temporal", "echo 'bad flag --frobnicate' >&2; exit 3"))
    s = DevServer(tmp_path / "t.db", binary=fake)
    with pytest.raises(StoreUnavailableError, match="status 3") as info:
        s.start()
    assert "bad flag --frobnicate" in str(info.value)
    assert info.value.url == f"temporal://{s.address}"
    assert not s.running and s.pid is None


def test_server_that_never_answers_is_stopped(tmp_path: Path) -> None:
    """A server silent past ready_timeout is stopped by pid and reported."""
    fake = str(_script(tmp_path / "temporal", "exec sleep 30"))
    s = DevServer(tmp_path / "t.db", binary=fake, ready_timeout=0.3)
    with pytest.raises(StoreUnavailableError, match=r"did not answer within 0\.3 s"):
        s.start()
    assert s.proc is not None and s.proc.poll() is not None


def test_free_port_is_bindable() -> None:
    """free_port returns a loopback port nothing listens on."""
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


@pytest.mark.temporal
def test_dev_server_keeps_runs_across_sigkill(temporal_bin: str, tmp_path: Path) -> None:
    """A run started on the server survives its SIGKILL: restarted on its file, it is there."""
    from temporalio.client import Client, WorkflowExecutionStatus

    wid = f"kept-{uuid.uuid4().hex[:8]}"
    server = DevServer(tmp_path / "t.db", binary=temporal_bin)
    try:
        server.start()
        assert server.answers() and server.pid is not None
        first_pid = server.pid

        async def start() -> None:
            c = await Client.connect(server.address)
            await c.start_workflow("nobody_serves_this", id=wid, task_queue="none")

        async def status() -> WorkflowExecutionStatus | None:
            c = await Client.connect(server.address)
            return (await c.get_workflow_handle(wid).describe()).status

        asyncio.run(start())
        server.kill()
        assert not server.running and not server.answers()
        server.start()  # the same port and file
        assert server.pid != first_pid
        assert asyncio.run(status()) == WorkflowExecutionStatus.RUNNING
    finally:
        server.stop()
    assert not server.running and not server.answers()
    assert os.path.exists(tmp_path / "t.db")


@pytest.mark.temporal
def test_sdk_local_environment_uses_the_installed_binary(temporal_bin: str) -> None:
    """WorkflowEnvironment.start_local(dev_server_existing_path=…) starts offline, no download."""
    from temporalio.testing import WorkflowEnvironment

    async def main() -> bool:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal_bin, ip="127.0.0.1"
        )
        try:
            return await env.client.service_client.check_health()
        finally:
            await env.shutdown()

    assert asyncio.run(main()) is True


def test_free_port_is_below_the_kernels_ephemeral_range() -> None:
    """Ports chosen for the dev server can never be handed to its internal services' bind(0)."""
    from surefoot.engines.temporal import _devserver as ds

    start = ds._ephemeral_start()
    ports = {ds.free_port() for _ in range(50)}
    assert all(1024 <= p < start for p in ports), sorted(ports)
