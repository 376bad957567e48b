"""A Redis server of the campaign's own, for faults no shared server may get: SIGKILL and
restart (``store_campaign.py --private-redis``), ACL users (tests/chaos/test_redis_acl.py).

It listens on a free loopback port, keeps its data in a folder of its own with the
append-only file on (``appendfsync`` ``always`` or ``everysec``, as Redis documents:
``always`` fsyncs before it answers, ``everysec`` once a second, so an OS crash or power
loss can take up to about a second, two when the disk is slow), no RDB snapshots, and
restarts from that file. ``off`` (no append-only file: a restart loses everything) is the
planted fault that shows a campaign can catch lost writes. Only the process started here
is ever signalled, by its pid.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_server() -> str | None:
    """The ``redis-server`` binary, or None."""
    return shutil.which("redis-server")


class PrivateRedis:
    """``redis-server`` on ``127.0.0.1:port`` with its data in ``folder``."""

    def __init__(
        self, folder: Path, appendfsync: str = "always", logfile: Path | None = None
    ) -> None:
        if appendfsync not in ("always", "everysec", "off"):
            raise ValueError(f"appendfsync must be always, everysec or off, got {appendfsync!r}")
        binary = redis_server()
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.binary, self.appendfsync = binary, appendfsync
        self.folder = folder
        self.logfile = logfile or folder / "redis.log"
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.start()

    def start(self, timeout: float = 30.0) -> None:
        """Start the server (again): it loads its append-only file before it answers."""
        cmd = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        cmd += ["--dir", str(self.folder), "--save", "", "--daemonize", "no"]
        if self.appendfsync == "off":
            cmd += ["--appendonly", "no"]
        else:
            cmd += ["--appendonly", "yes", "--appendfsync", self.appendfsync]
        cmd += ["--logfile", str(self.logfile), "--protected-mode", "yes"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.logfile.read_text(errors="replace")[-600:]
                raise RuntimeError(f"redis-server on port {self.port} did not start: {log}")
            time.sleep(0.02)

    def answers(self) -> bool:
        """Whether the server answers PING (not while it loads its file)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the server (ours, by pid): what it had not written to its file is gone."""
        if self._stop():
            self.kills += 1

    def _stop(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            return False
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return True

    def restart(self, down: float = 0.0) -> None:
        self.kill()
        time.sleep(down)
        self.start()

    def client(self, **kwargs: Any) -> Any:
        import redis

        return redis.Redis.from_url(self.url, **kwargs)

    def close(self) -> None:
        self._stop()

    def __enter__(self) -> PrivateRedis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
