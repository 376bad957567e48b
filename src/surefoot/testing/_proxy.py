"""``FaultProxy``: a loopback TCP proxy that makes commits ambiguous, on cue.

It sits between a client and PostgreSQL or Redis and forwards bytes unchanged until told
otherwise: drop the server's reply to a COMMIT (or to a Redis ``EXEC`` / script) after
forwarding it, so the server applies the transaction and the client only sees its
connection cut; reset a connection in the middle of a transaction (an RST); blackhole
every connection (forward nothing, hold the sockets); delay every chunk; heal.

A fault is armed for the next ``times`` matching messages (None: until ``heal()``), each
firing with a seeded ``probability``; the proxy counts what it saw and did, so a test
asserts counts (commits seen, replies dropped, resets), never times.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError
from ._framing import Message
from ._proxy_parts import Arm, Connection, target

__all__ = ["FaultProxy", "ProxyCounts"]


@dataclass(frozen=True, slots=True)
class ProxyCounts:
    """What the proxy saw and did since it started.

    Attributes:
        connections: client connections accepted.
        commits_seen: COMMITs (PostgreSQL) or EXEC / EVAL / EVALSHA / FCALL (Redis) a client
            sent through the proxy.
        replies_dropped: replies to those swallowed before their connection was cut.
        resets: connections reset (RST) in the middle of a transaction.
        held: chunks a blackhole held back. delayed: chunks forwarded late.
        bytes_up / bytes_down: bytes forwarded to the server / to clients.
    """

    connections: int = 0
    commits_seen: int = 0
    replies_dropped: int = 0
    resets: int = 0
    held: int = 0
    delayed: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


class FaultProxy:
    """A TCP proxy on 127.0.0.1 (a free port) to PostgreSQL, Redis or any server, with faults
    switched on and off while it runs. It runs in a background thread.

    ::

        with FaultProxy("postgresql://postgres@127.0.0.1:5432/test") as proxy:
            conn = psycopg.connect(proxy.url)          # the same URL, the proxy's port
            proxy.drop_reply_to_commit()
            conn.execute("INSERT …"); conn.commit()    # OperationalError: the outcome is
            assert proxy.counts().replies_dropped == 1 # unknown, and the row is there

    Args:
        upstream: the server: a ``postgresql://`` or ``redis://`` URL (its scheme names the
            protocol), ``"host:port"`` or ``(host, port)``.
        protocol: ``postgres``, ``redis`` or ``raw`` (no parsing: ``reset`` fires on the next
            chunk a client sends, commit faults are refused); from the URL by default.
        seed: seeds the choice of which matching messages a ``probability`` fault hits.
        port: the port to listen on (0: a free one).

    PostgreSQL clients are told the proxy has no TLS (it answers an SSL request with "N"),
    so ``sslmode=prefer`` (libpq's default) goes on in plain text; ``sslmode=require``
    cannot pass through it.
    """

    def __init__(
        self,
        upstream: str | tuple[str, int],
        *,
        protocol: str | None = None,
        seed: int = 0,
        port: int = 0,
    ) -> None:
        self.host, self.upstream_port, self.protocol, self._url = target(upstream, protocol)
        self._listen = port
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(ProxyCounts.__slots__, 0)
        self._drop: Arm | None = None
        self._reset: Arm | None = None
        self._delay = 0.0
        self._blackholed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flowing: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._conns: set[Connection] = set()
        self.port = 0

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Listen on 127.0.0.1 and serve in a daemon thread. Returns self."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failed: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._main, args=(ready, failed), name="surefoot-fault-proxy", daemon=True
        )
        self._thread.start()
        ready.wait()
        if failed:
            self._thread.join()
            self._thread = None
            raise failed[0]
        return self

    def stop(self) -> None:
        """Close every connection and the listener, and end the thread."""
        if self._thread is None or self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        """Where clients connect: ``("127.0.0.1", port)``."""
        return ("127.0.0.1", self.port)

    @property
    def url(self) -> str:
        """The upstream URL with the proxy's host and port (user, password, database and
        options kept), for a proxy made from a URL."""
        if self._url is None:
            raise ConfigError(
                "this proxy was made from (host, port), not a URL; connect to proxy.address"
            )
        parts = urlsplit(self._url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    # -- faults ------------------------------------------------------------------------

    def drop_reply_to_commit(
        self,
        times: int | None = 1,
        probability: float = 1.0,
        *,
        implicit: bool = False,
        matching: str | None = None,
    ) -> None:
        """PostgreSQL: forward the next COMMITs (``times`` of them, each with
        ``probability``), swallow the server's reply, then cut the client's connection: the
        transaction is applied and the client cannot know it.

        Args:
            implicit: also a statement sent outside a transaction block (autocommit: it
                commits on its own, so its reply is its commit's).
            matching: only transactions with a statement matching this regular expression
                (case-insensitive), searched in its SQL and, for the extended protocol, the
                parameters it was bound with: ``"INSERT INTO orders"``, or a key's name.
        """
        self._arm_drop("postgres", "drop_reply_to_commit", times, probability, implicit, matching)

    def drop_reply_to_exec(
        self, times: int | None = 1, probability: float = 1.0, *, matching: str | None = None
    ) -> None:
        """Redis: the same for ``EXEC``, ``EVAL``, ``EVALSHA`` and ``FCALL`` (and their
        ``_RO`` forms): forwarded, applied, reply swallowed, connection cut. ``matching``:
        only a script call, or a ``MULTI`` block, whose command bytes match it."""
        self._arm_drop("redis", "drop_reply_to_exec", times, probability, False, matching)

    def _arm_drop(
        self,
        protocol: str,
        what: str,
        times: int | None,
        probability: float,
        implicit: bool,
        matching: str | None,
    ) -> None:
        if self.protocol != protocol:
            raise ConfigError(f"{what} needs a {protocol} proxy; this one speaks {self.protocol}")
        arm = Arm(times, probability, what, implicit=implicit, matching=matching)
        with self._lock:
            self._drop = arm

    def reset(self, times: int | None = 1, probability: float = 1.0) -> None:
        """Reset (RST, ``SO_LINGER`` 0) the connection when a client sends inside a
        transaction (PostgreSQL: the server reported one open; Redis: after ``MULTI``; raw:
        any chunk), before that message reaches the server: the server rolls back."""
        arm = Arm(times, probability, "reset")
        with self._lock:
            self._reset = arm

    def blackhole(self) -> None:
        """Forward nothing, either way, on every connection (new ones are accepted and
        held too) until ``heal()``; nothing is closed, so clients wait for their timeouts."""
        self._set_flowing(False)

    def delay(self, seconds: float) -> None:
        """Hold every chunk ``seconds`` before forwarding it, both ways (0: no delay)."""
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 <= seconds < float("inf")
        ):
            raise ConfigError(f"delay must be finite seconds >= 0, got {seconds!r}")
        with self._lock:
            self._delay = float(seconds)

    def heal(self) -> None:
        """Disarm every fault, end the blackhole (held chunks go on) and the delay."""
        with self._lock:
            self._drop = self._reset = None
            self._delay = 0.0
        self._set_flowing(True)

    def counts(self) -> ProxyCounts:
        """What the proxy saw and did so far."""
        with self._lock:
            return ProxyCounts(**self._counts)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _set_flowing(self, on: bool) -> None:
        self._blackholed = not on
        loop, flowing = self._loop, self._flowing
        if loop is None or flowing is None:
            return

        async def apply() -> None:
            if on:
                flowing.set()
            else:
                flowing.clear()

        self._run(apply)

    def _run(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(fn(), self._loop).result(timeout=10)

    def __repr__(self) -> str:
        where = f"127.0.0.1:{self.port} -> {self.host}:{self.upstream_port}"
        return f"FaultProxy({self.protocol}, {where})"

    # -- the loop ----------------------------------------------------------------------

    def _main(self, ready: threading.Event, failed: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        try:
            self._flowing = asyncio.Event()
            if not self._blackholed:
                self._flowing.set()
            self._server = loop.run_until_complete(
                asyncio.start_server(self._serve, "127.0.0.1", self._listen)
            )
            self.port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:
            failed.append(exc)
            loop.close()
            ready.set()
            return
        self._loop = loop
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            c.abort(rst=False)
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        c = Connection(self.protocol, (reader, writer))
        self._conns.add(c)
        self._count("connections")
        try:
            c.sreader, c.swriter = await asyncio.open_connection(self.host, self.upstream_port)
            pumps = [asyncio.create_task(self._up(c)), asyncio.create_task(self._down(c))]
            self._tasks.update(pumps)
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in pumps:
                    t.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
                self._tasks.difference_update(pumps)
        except (OSError, asyncio.CancelledError):
            # The server refused, or the proxy stops: this connection ends here. A cancelled
            # handler returns normally, since asyncio's stream callback would log it.
            pass
        finally:
            c.abort(rst=False)
            self._conns.discard(c)
            self._tasks.discard(task)

    async def _gate(self) -> None:
        assert self._flowing is not None
        if not self._flowing.is_set():
            self._count("held")
            await self._flowing.wait()
        with self._lock:
            wait = self._delay
        if wait > 0:
            self._count("delayed")
            await asyncio.sleep(wait)

    async def _up(self, c: Connection) -> None:
        """Client to server: whole messages, each looked at before it is forwarded."""
        while True:
            data = await c.creader.read(65536)
            if not data:
                return
            await self._gate()
            msgs = c.up.feed(data) if c.up is not None else [Message(data, "raw")]
            out = bytearray()
            for m in msgs:
                if m.kind == "negotiate":  # no TLS / GSS here: the client goes on in plain text
                    c.cwriter.write(b"N")
                    continue
                if self._resets(c, m):
                    with self._lock:
                        self._counts["resets"] += 1
                    c.abort(rst=True)
                    return
                self._watch(c, m)
                out += m.raw
            if out:
                c.swriter.write(bytes(out))
                self._count("bytes_up", len(out))
                await c.swriter.drain()

    def _resets(self, c: Connection, m: Message) -> bool:
        if m.kind in ("startup", "cancel") or not c.in_transaction():
            return False
        with self._lock:
            return self._reset is not None and self._reset.fire(self._rng)

    def _watch(self, c: Connection, m: Message) -> None:
        """Account for a client message about to be forwarded; arm a dropped reply."""
        c.expected += m.replies
        with self._lock:
            arm = self._drop
        pattern = arm.matching if arm is not None else None
        hit = pattern is None or bool(pattern.search(m.text))
        implicit = False
        if self.protocol == "redis":
            ends = m.kind in ("EXEC", "DISCARD")
            if m.kind == "MULTI":
                c.in_block, c.block_hit = True, False
            elif c.in_block and not ends:
                c.block_hit = c.block_hit or hit
            hit = hit or (m.kind == "EXEC" and c.block_hit)
            c.in_block = c.in_block and not ends
        elif m.kind in ("Q", "E"):
            implicit = not (m.commit or m.rollback or m.begin or c.in_block)
            if m.begin or c.in_block:
                c.block_hit = c.block_hit or hit
            if m.commit:
                hit = hit or c.block_hit
            if m.commit or m.rollback:
                c.in_block, c.block_hit = False, False
            elif m.begin:
                c.in_block = True
        else:
            return
        if m.commit:
            self._count("commits_seen")
        if arm is None or not hit or not (m.commit or (implicit and arm.implicit)):
            return
        with self._lock:
            fire = self._drop is arm and arm.fire(self._rng)
        if fire and c.drop_at is None:
            # A simple Query's reply is its own ReadyForQuery; an Execute's comes with the
            # Sync that follows it; a Redis command's is its own.
            c.drop_at = c.expected + (1 if m.kind == "E" else 0)

    async def _down(self, c: Connection) -> None:
        """Server to client: forwarded, unless a reply is being dropped."""
        while True:
            data = await c.sreader.read(65536)
            if not data:
                return
            if c.down is not None:
                c.down.feed(data)
            if c.drop_at is not None:
                if c.replies() >= c.drop_at:
                    self._count("replies_dropped")
                    c.abort(rst=False)
                    return
                continue
            await self._gate()
            c.cwriter.write(data)
            self._count("bytes_down", len(data))
            await c.cwriter.drain()
