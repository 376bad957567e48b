"""Sessions with an MCP server: a new one per step, or one kept open per event loop.

A kept session is owned by one task of the loop the workflows run on (the SDK's client must
be entered and left by the same task); steps hand it their requests through a queue and it
runs them one at a time. When the connection fails (the server died, the network dropped),
the request in flight gets the error, the session is closed, and the next request opens a
new one, so a retried step never reuses a broken connection.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._server import McpServer, McpTransportError, classify_error, connect

__all__ = ["Sessions"]

T = TypeVar("T")
Request = Callable[[Any], Awaitable[Any]]


class _Owner:
    """The task that holds one open session on one loop."""

    def __init__(self, server: McpServer, loop: asyncio.AbstractEventLoop) -> None:
        self.server = server
        self.loop = loop
        self.queue: asyncio.Queue[tuple[Request, asyncio.Future[Any]] | None] = asyncio.Queue()
        self.task = loop.create_task(self._main())

    @property
    def alive(self) -> bool:
        return not self.task.done()

    async def submit(self, fn: Request) -> Any:
        fut: asyncio.Future[Any] = self.loop.create_future()
        await self.queue.put((fn, fut))
        return await fut

    async def _main(self) -> None:
        pending: asyncio.Future[Any] | None = None
        try:
            async with connect(self.server) as session:
                while True:
                    item = await self.queue.get()
                    if item is None:
                        return
                    fn, pending = item
                    try:
                        value = await fn(session)
                    except Exception as exc:
                        if not pending.done():
                            pending.set_exception(exc)
                        if isinstance(classify_error(self.server, "", exc), McpTransportError):
                            return  # a broken connection: the next request opens a new one
                        continue
                    if not pending.done():
                        pending.set_result(value)
                    pending = None
        except Exception as exc:  # the session could not open, or broke under a request
            if pending is not None and not pending.done():
                pending.set_exception(exc)
            self._fail_queued(exc)
        finally:
            self._fail_queued(McpTransportError(f"{self.server.where()}: the session closed"))

    def _fail_queued(self, exc: BaseException) -> None:
        while not self.queue.empty():
            item = self.queue.get_nowait()
            if item is not None and not item[1].done():
                item[1].set_exception(exc)

    async def stop(self) -> None:
        await self.queue.put(None)
        await asyncio.wait({self.task}, timeout=10)


class Sessions:
    """How the steps of one client reach its server.

    Args:
        server: the server.
        keep_open: False: each request opens and closes its own session. True: one session
            per event loop, kept open across steps and runs until :meth:`close`.
    """

    def __init__(self, server: McpServer, *, keep_open: bool = False) -> None:
        self.server = server
        self.keep_open = keep_open
        self._owners: dict[int, _Owner] = {}
        self._lock = threading.Lock()

    async def run(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """``await fn(session)`` on a session of the server."""
        if not self.keep_open:
            async with connect(self.server) as session:
                return await fn(session)
        loop = asyncio.get_running_loop()
        with self._lock:
            owner = self._owners.get(id(loop))
            if owner is None or not owner.alive or owner.loop is not loop:
                owner = self._owners[id(loop)] = _Owner(self.server, loop)
        value: T = await owner.submit(fn)
        return value

    def close(self) -> None:
        """Close the kept sessions (call it before the app's own ``close``)."""
        with self._lock:
            owners, self._owners = list(self._owners.values()), {}
        for owner in owners:
            if not owner.alive or owner.loop.is_closed():
                continue
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is owner.loop:  # on the loop itself: ask, do not wait
                owner.queue.put_nowait(None)
            else:
                asyncio.run_coroutine_threadsafe(owner.stop(), owner.loop).result(timeout=15)
