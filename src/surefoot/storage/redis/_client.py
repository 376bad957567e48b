"""One Redis server (and one key prefix on it), shared by a ``RedisStorage``.

Every write is one Lua script, so it is atomic on the server and costs one round trip.
Losing the server is handled in one place, :meth:`RedisDB.call`: a connection that could not
be made is retried with bounded back-off; a connection that broke after a write was sent is
retried when the write is idempotent (a stream append deduplicated by message id). A write
that can be recognised (``resolve``) is looked for: first the connection that sent it is
closed on the server (``CLIENT KILL ID``, its id read once when it connected), so nothing it
sent can still run; then ``resolve`` reads whether the write landed: found, its answer is
returned; not found, it is sent again. Otherwise ``OutcomeUnknownError`` says the outcome is
unknown.
"""

from __future__ import annotations

import os
import random
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...backoff import RECONNECT
from ...clock import Clock, SystemClock
from ...errors import (
    ConfigError,
    MissingExtraError,
    OutcomeUnknownError,
    SchemaVersionError,
    StoreUnavailableError,
)
from ..checks import DEFAULT_MAX_VALUE_BYTES, value_limit
from ..url import StorageURL, redact

__all__ = ["LAYOUT", "NOT_APPLIED", "OPTIONS", "RedisDB", "import_redis"]

T = TypeVar("T")

#: What a ``resolve`` function returns when the write it looks for did not land.
NOT_APPLIED: Any = object()


def _connected(conn: Any) -> None:
    """redis-py's connect hook: the usual handshake, then who the server says this
    connection is (``CLIENT INFO``: its id and address; one round trip per connection), to
    close exactly it on the server after a lost answer (see ``RedisDB.call``)."""
    from redis.exceptions import ResponseError  # redis-py is loaded by now

    conn.on_connect()
    conn.surefoot_client_id, conn.surefoot_client_addr = 0, ""
    try:
        conn.send_command("CLIENT", "INFO", check_health=False)
        info = conn.read_response()
    except ResponseError:  # Redis < 6.2, or not permitted: the id alone, if allowed
        try:
            conn.send_command("CLIENT", "ID", check_health=False)
            conn.surefoot_client_id = int(conn.read_response())
        except ResponseError:  # not permitted (ACL): a lost answer stays OutcomeUnknownError
            pass
        return
    fields = dict(
        part.split("=", 1)
        for part in (info.decode() if isinstance(info, bytes) else str(info)).split()
        if "=" in part
    )
    conn.surefoot_client_id = int(fields.get("id", 0))
    conn.surefoot_client_addr = fields.get("addr", "")


def _who(sender: tuple[int, str]) -> list[str]:
    """``CLIENT KILL`` filters naming one connection: its id and, where known, its address.
    Both must match: after a server restart ids start again from 1, and the id alone could
    close another client's connection."""
    client_id, addr = sender
    return ["ID", str(client_id), *(["ADDR", addr] if addr else [])]


#: URL query options read by surefoot (others are passed to redis-py's ``from_url``).
OPTIONS = {
    "prefix": "surefoot",  # every key starts with this; one prefix per deployment or test
    "socket_timeout": "5",  # seconds for one command
    "reconnect_timeout": "30",  # seconds of bounded back-off before StoreUnavailableError
    "max_value_bytes": str(DEFAULT_MAX_VALUE_BYTES),  # largest value or message; 0: no limit
}

#: The key layout this surefoot writes, marked in ``P:layout`` on first open. A prefix marked
#: with a higher number was written by a newer surefoot and is refused, untouched; one marked
#: lower is upgraded (each part migrates in place when opened). 2: every state namespace keeps
#: an index of its change log by key, which an older surefoot would not maintain.
LAYOUT = 2

# Set the mark if absent (or older) and return it: one idempotent round trip (it also checks
# the server).
_LAYOUT_SCRIPT = """
local v = redis.call('GET', KEYS[1])
if (not v) or (tonumber(v) and tonumber(v) < tonumber(ARGV[1])) then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return v
"""

_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


def import_redis() -> Any:
    """Import ``redis`` lazily.

    Raises:
        MissingExtraError: the ``redis`` extra is not installed.
    """
    try:
        import redis
    except ImportError as exc:
        raise MissingExtraError("redis", "redis:// stores") from exc
    return redis


def _hint(message: str) -> str:
    low = message.lower()
    if "auth" in low or "password" in low or "noperm" in low:
        return "check the user name and password in the URL"
    if "name or service not known" in low or "resolve" in low:
        return "check the host name in the URL"
    if "db index" in low or "invalid db" in low:
        return "check the database number at the end of the URL (redis://host:6379/0)"
    return "check that the server is running and listening on that host and port"


class RedisDB:
    """A redis-py client with surefoot's options, error translation and counters.

    Args:
        parsed: the parsed ``redis://`` URL; see :data:`OPTIONS` for its query options.
        clock: waits between reconnect attempts (``SystemClock`` by default).

    Attributes:
        url: the URL without its password.
        prefix: the key prefix.
        commits: write scripts run through this object (tests count them).
        round_trips: commands sent (tests count them).

    Raises:
        ConfigError: a bad option value.
        MissingExtraError: redis-py is not installed.
        StoreUnavailableError: the server cannot be reached with this URL.
    """

    def __init__(self, parsed: StorageURL, *, clock: Clock | None = None) -> None:
        self.redis = import_redis()
        self.url = redact(parsed.url)
        opts = {k: parsed.options.get(k, v) for k, v in OPTIONS.items()}
        self.prefix = opts["prefix"]
        if not _PREFIX_RE.match(self.prefix):
            raise ConfigError(
                f"prefix must be 1-100 characters from A-Z a-z 0-9 _ . : -, got "
                f"{self.prefix!r} in {self.url!r}"
            )
        try:
            self.socket_timeout = float(opts["socket_timeout"])
            self.reconnect_timeout = float(opts["reconnect_timeout"])
        except ValueError:
            raise ConfigError(
                f"socket_timeout and reconnect_timeout must be seconds, got "
                f"{opts['socket_timeout']!r} and {opts['reconnect_timeout']!r} in {self.url!r}"
            ) from None
        self.max_value_bytes = value_limit(self.url, opts)
        self.clock: Clock = clock or SystemClock()
        self.commits = 0
        self.round_trips = 0
        self._lock = threading.Lock()
        self._rng = random.Random(f"{os.getpid()}:{self.url}")
        parts = urlsplit(parsed.url)
        kept = [(k, v) for k, v in parse_qsl(parts.query) if k not in OPTIONS]
        plain = urlunsplit(parts._replace(query=urlencode(kept)))
        try:
            self.client = self.redis.Redis.from_url(
                plain,
                decode_responses=True,
                socket_timeout=self.socket_timeout,
                socket_connect_timeout=self.socket_timeout,
                redis_connect_func=_connected,
            )
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL {self.url!r}: {exc}") from exc
        # Which connection this thread used last: the one that sent a write whose answer
        # was lost (redis-py takes one from its pool per command).
        self._used = threading.local()
        pool = self.client.connection_pool
        take = pool.get_connection

        def get_connection(*args: Any, **kwargs: Any) -> Any:
            conn = take(*args, **kwargs)
            self._used.conn = conn
            return conn

        pool.get_connection = get_connection
        self._scripts: dict[str, Any] = {}
        try:
            # A server that is not answering yet (restarting) is waited for, within
            # reconnect_timeout, like a lost connection; wrong credentials fail at once.
            mark = self.key("layout")
            layout = self.script("layout_v2", _LAYOUT_SCRIPT)
            found = self.call(lambda c: layout(keys=[mark], args=[LAYOUT], client=c), write=False)
        except self.redis.RedisError as exc:
            raise self.unavailable(exc) from exc
        if not str(found).isdigit() or int(found) > LAYOUT:
            raise SchemaVersionError(
                self.url,
                f"the key prefix {self.prefix!r} at {self.url!r} is marked with key layout "
                f"{found!r} ({mark}), written by a newer surefoot (this one writes layout "
                f"{LAYOUT}); upgrade surefoot, or use another prefix (?prefix=...). Nothing was "
                "changed.",
            )

    def unavailable(self, exc: BaseException, doing: str = "connect to") -> StoreUnavailableError:
        """A ``StoreUnavailableError`` for ``exc`` naming the URL and what to check."""
        text = " ".join(str(exc).split()).rstrip(".")
        return StoreUnavailableError(
            self.url, f"cannot {doing} Redis at {self.url!r}: {text}; {_hint(text)}."
        )

    def key(self, *parts: str) -> str:
        """A key under this prefix: ``prefix:part1:part2``."""
        return ":".join((self.prefix, *parts))

    def script(self, name: str, source: str) -> Any:
        """A registered Lua script (EVALSHA with a fallback to EVAL, handled by redis-py)."""
        s = self._scripts.get(name)
        if s is None:
            s = self._scripts[name] = self.client.register_script(source)
        return s

    def call(
        self,
        fn: Callable[[Any], T],
        *,
        write: bool = True,
        idempotent: bool = False,
        resolve: Callable[[], Any] | None = None,
    ) -> T:
        """Run ``fn(client)``, reconnecting within ``reconnect_timeout`` when that is safe.

        ``resolve()``, for a write that is not idempotent but can be recognised, returns
        what ``fn`` would have returned if the write is in the database, else
        ``NOT_APPLIED``; it runs after the connection that sent the write was closed on the
        server (see the module's docstring).

        Raises:
            StoreUnavailableError: no connection in time.
            OutcomeUnknownError: the connection broke after a non-idempotent write was sent
                and whether it landed could not be found out.
        """
        redis = self.redis
        deadline = self.clock.monotonic() + self.reconnect_timeout
        failed = 0
        while True:
            try:
                self._used.conn = None
                result = fn(self.client)
                self.round_trips += 1
                if write:
                    with self._lock:
                        self.commits += 1
                return result
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if isinstance(exc, redis.AuthenticationError):
                    raise self.unavailable(exc) from exc
                never_sent = "connecting to" in str(exc)
                if write and not idempotent and not never_sent:
                    used = getattr(self._used, "conn", None)
                    sender = (
                        getattr(used, "surefoot_client_id", 0),
                        getattr(used, "surefoot_client_addr", ""),
                    )
                    found = self._resolve(sender, resolve, exc, deadline)
                    if found is not NOT_APPLIED:
                        with self._lock:
                            self.commits += 1
                        return found  # type: ignore[no-any-return]
                    # Not there, and its connection is closed: sending again cannot apply
                    # it twice.
                failed += 1
                if self.clock.monotonic() + RECONNECT.ceiling(failed) > deadline:
                    raise self.unavailable(exc, "reach") from exc
            # Bounded back-off (the core schedule), seeded per process so workers
            # reconnecting after a restart spread out.
            self.clock.sleep(RECONNECT.wait(failed, self._rng))

    def _resolve(
        self,
        sender: tuple[int, str],
        resolve: Callable[[], Any] | None,
        exc: BaseException,
        deadline: float,
    ) -> Any:
        """Whether a write whose answer was lost landed: its answer, or NOT_APPLIED, once
        the connection ``sender`` (its server-side id) is closed on the server: Redis runs a
        client's commands one at a time and drops what a closed client sent but it had not
        yet read, so from then on the write is in or never will be."""
        why = (
            f"lost the connection to Redis at {self.url!r} after a write was sent "
            f"({' '.join(str(exc).split())}); it may or may not have been applied"
        )
        if resolve is None or not sender[0]:
            raise OutcomeUnknownError(
                self.url, f"{why}. Read the current state before writing again."
            ) from exc
        redis = self.redis
        failed = 0
        while True:
            try:
                try:
                    self.client.execute_command("CLIENT", "KILL", *_who(sender))
                except redis.ResponseError as refused:
                    if "no such client" not in str(refused).lower():  # e.g. not permitted
                        raise OutcomeUnknownError(
                            self.url,
                            f"{why}, and closing its connection on the server to find out "
                            f"was refused ({refused}). Read the current state before "
                            "writing again.",
                        ) from exc
                return resolve()
            except (redis.ConnectionError, redis.TimeoutError):
                failed += 1
            if self.clock.monotonic() + RECONNECT.ceiling(failed) > deadline:
                raise OutcomeUnknownError(
                    self.url,
                    f"{why}, and the server could not be reached within reconnect_timeout "
                    f"({self.reconnect_timeout:g} s) to find out. Read the current state "
                    "before writing again.",
                ) from exc
            self.clock.sleep(RECONNECT.wait(failed, self._rng))

    def delete_prefix(self) -> int:
        """Delete every key under this prefix (tests, resets); returns how many."""
        n = 0
        for k in self.client.scan_iter(match=f"{self.prefix}:*", count=500):
            n += int(self.client.delete(k))
        return n

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()
