"""Record surefoot operations as history entries, in the shapes the checkers read.

Each helper invokes, calls surefoot's public API, and completes: ``ok`` with the result,
``fail`` when the API says for certain that nothing happened (a refused compare-and-set, a
failed transaction compare, a reused message id), and ``info`` for any other exception,
which it then re-raises: a lost connection or a timeout leaves the outcome unknown, and the
caller decides whether to go on (with the same client: it has a fresh process id).

Shapes (``value`` of the completion; the invocation carries the same keys without results):

- register (``check_register``): ``read`` ``{"key", "version", "value"}`` (version 0 and
  value None: absent); ``write`` ``{"key", "value", "expect", "version"}`` (``expect``
  None: last-writer-wins); a refused write fails with ``"current"``, the version found.
- list-append (``check_list_append``): ``txn`` with a list of micro-operations
  ``["append", key, element]`` and ``["r", key, [elements…]]`` (None on the invocation).
- stream (``check_queue``): ``append`` ``{"stream", "id", "payload", "seq", "duplicate"}``,
  ``fetch`` ``{"stream", "group", "messages": [{"seq", "id", "payload", "attempt"}]}``,
  ``ack`` ``{"stream", "group", "seq", "acked"}``, ``dead-letters`` ``{"stream", "group",
  "messages": [{"seq", "id", "reason"}]}``.
- journal (``check_steps``): ``exec`` ``{"run", "step", "pos", "key", "epoch", "attempt"}``
  around each execution of a step body, ``journal`` ``{"run", "steps": {pos: {"name",
  "status", "digest"}}}`` for a read of the run's journal.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from ...codec import dumps
from ...errors import ConflictError, DuplicateMessageError
from ._ops import Op
from ._recorder import Client, Recorder

__all__ = [
    "record_ack",
    "record_append",
    "record_append_txn",
    "record_dead_letters",
    "record_fetch",
    "record_journal",
    "record_list_read",
    "record_read",
    "record_stream_append",
    "record_write",
    "recorded_step",
]

F = TypeVar("F", bound=Callable[..., Any])


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def _unknown_outcome(
    client: Client, *, certain: tuple[type[BaseException], ...] = ()
) -> Iterator[None]:
    """Any exception but a ``certain`` failure leaves the outcome unknown: record ``info``
    and re-raise it."""
    try:
        yield
    except certain:
        raise
    except BaseException as exc:
        client.info(error=_error(exc))
        raise


# -- registers: Store.read / Store.write ---------------------------------------------------


def record_read(client: Client, store: Any, key: str) -> Op:
    """``store.read(key)`` as a register ``read``."""
    client.invoke("read", {"key": key})
    with _unknown_outcome(client):
        e = store.read(key)
    if e is None:
        return client.ok({"key": key, "version": 0, "value": None})
    return client.ok({"key": key, "version": e.version, "value": e.value})


def record_write(
    client: Client, store: Any, key: str, value: Any, *, expect: int | None = None
) -> Op:
    """``store.write(key, value, expect=expect)`` as a register ``write``; a
    ``ConflictError`` is a ``fail`` carrying the version found (the returned op says which).
    """
    arg = {"key": key, "value": value, "expect": expect}
    client.invoke("write", arg)
    try:
        with _unknown_outcome(client, certain=(ConflictError,)):
            e = store.write(key, value, expect=expect)
    except ConflictError as exc:
        return client.fail({**arg, "current": exc.version}, error=_error(exc))
    return client.ok({**arg, "version": e.version})


# -- lists: Store.merge (append), Store.read / snapshot, Store.txn -------------------------


def record_append(
    client: Client, store: Any, key: str, element: Any, *, id: str | None = None
) -> Op:
    """``store.merge(key, element, id=id)`` on an ``append`` merge key, as a one-append
    ``txn``. A duplicate ``id`` (not applied again) is still ``ok``: the element is in."""
    mops = [["append", key, element]]
    client.invoke("txn", mops)
    with _unknown_outcome(client):
        store.merge(key, element, id=id)
    return client.ok(mops)


def record_list_read(client: Client, store: Any, keys: list[str]) -> Op:
    """Read list keys as one ``txn`` of reads: one key with ``read``, several from one
    ``snapshot()`` (atomic). An absent key reads as ``[]``."""
    client.invoke("txn", [["r", k, None] for k in keys])
    with _unknown_outcome(client):
        if len(keys) == 1:
            e = store.read(keys[0])
            lists = {keys[0]: e.value if e is not None else []}
        else:
            snap = store.snapshot()
            lists = {k: snap[k].value if k in snap else [] for k in keys}
    return client.ok([["r", k, list(lists[k])] for k in keys])


def record_append_txn(
    client: Client, store: Any, appends: Sequence[tuple[str, Any]], *, reads: Sequence[str] = ()
) -> Op:
    """An optimistic multi-key transaction on plain list keys: read every key it touches,
    then ``store.txn`` comparing each version read and putting each appended list. ``fail``
    when a compare did not hold (nothing was written)."""
    keys = list(dict.fromkeys([*reads, *(k for k, _ in appends)]))
    client.invoke("txn", [["r", k, None] for k in keys] + [["append", k, x] for k, x in appends])
    with _unknown_outcome(client):
        lists, versions = {}, {}
        for k in keys:
            e = store.read(k)
            lists[k] = list(e.value) if e is not None else []
            versions[k] = e.version if e is not None else 0
        new = {k: list(lists[k]) for k, _ in appends}
        for k, x in appends:
            new[k].append(x)
        res = store.txn(versions, [("put", k, v) for k, v in new.items()])
    mops = [["r", k, lists[k]] for k in keys] + [["append", k, x] for k, x in appends]
    if not res.succeeded:
        return client.fail(mops, error=_error(res.conflict) if res.conflict else None)
    return client.ok(mops)


# -- streams -------------------------------------------------------------------------------


def record_stream_append(
    client: Client,
    stream: Any,
    payload: Any,
    *,
    message_id: str,
    expect_last_seq: int | None = None,
) -> Op:
    """``stream.append(payload, message_id=…)``; a reused id with another payload or a
    refused ``expect_last_seq`` is a ``fail``."""
    arg = {"stream": stream.name, "id": message_id, "payload": payload}
    client.invoke("append", arg)
    try:
        with _unknown_outcome(client, certain=(ConflictError, DuplicateMessageError)):
            e = stream.append(payload, message_id=message_id, expect_last_seq=expect_last_seq)
    except (ConflictError, DuplicateMessageError) as exc:
        return client.fail(arg, error=_error(exc))
    return client.ok({**arg, "seq": e.seq, "duplicate": e.duplicate})


def record_fetch(
    client: Client, consumer: Any, limit: int = 10, *, worker: str = "", block: float = 0.0
) -> tuple[Op, list[Any]]:
    """``consumer.fetch(…)``: the ``fetch`` op and the messages (to ack or reject)."""
    arg = {"stream": consumer.stream.name, "group": consumer.name}
    client.invoke("fetch", arg)
    with _unknown_outcome(client):
        got = consumer.fetch(limit, worker=worker, block=block)
    msgs = [
        {"seq": m.seq, "id": m.message_id, "payload": m.payload, "attempt": m.attempt} for m in got
    ]
    return client.ok({**arg, "messages": msgs}), got


def record_ack(client: Client, consumer: Any, message: Any) -> Op:
    """``consumer.ack(message)``; ``acked`` False when it was no longer pending."""
    seq = message if isinstance(message, int) else message.seq
    arg = {"stream": consumer.stream.name, "group": consumer.name, "seq": seq}
    client.invoke("ack", arg)
    with _unknown_outcome(client):
        acked = consumer.ack(seq)
    return client.ok({**arg, "acked": bool(acked)})


def record_dead_letters(client: Client, consumer: Any) -> Op:
    """``consumer.dead_letters()``: which messages the group gave up on, and why."""
    arg = {"stream": consumer.stream.name, "group": consumer.name}
    client.invoke("dead-letters", arg)
    with _unknown_outcome(client):
        dead = consumer.dead_letters()
    msgs = [{"seq": d.seq, "id": d.message_id, "reason": d.reason} for d in dead]
    return client.ok({**arg, "messages": msgs})


# -- the durable journal -------------------------------------------------------------------


def recorded_step(recorder: Recorder) -> Callable[[F], F]:
    """Wrap a step body (under ``@app.step``) so each execution is an ``exec`` operation.

    ::

        @app.step(effect=True)
        @recorded_step(rec)
        def publish(draft: str, *, key: str) -> str: ...

    Each execution gets its own client: an invocation when the body starts, ``ok`` when it
    returns, ``fail`` when it raises; a process killed inside it leaves the invocation
    open (an unknown outcome). Sync and async bodies both work; the signature is kept.
    """

    from ...durable import current_run  # only for journal recordings

    def wrap(fn: F) -> F:
        def begin() -> Client:
            ctx = current_run()
            c = recorder.client()
            c.invoke(
                "exec",
                {
                    "run": ctx.run_id if ctx else None,
                    "step": ctx.step if ctx else fn.__name__,
                    "pos": ctx.pos if ctx else None,
                    "key": ctx.key if ctx else None,
                    "epoch": ctx.epoch if ctx else None,
                    "attempt": ctx.attempt if ctx else None,
                },
            )
            return c

        @contextlib.contextmanager
        def executing() -> Iterator[None]:
            c = begin()
            try:
                yield
            except BaseException as exc:
                c.fail(error=_error(exc))
                raise
            c.ok()

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def arun(*args: Any, **kwargs: Any) -> Any:
                with executing():
                    return await fn(*args, **kwargs)

            return arun  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with executing():
                return fn(*args, **kwargs)

        return run  # type: ignore[return-value]

    return wrap


def _digest(value: Any) -> str:
    return hashlib.sha256(dumps(value).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def record_journal(client: Client, app: Any, run_id: str) -> Op:
    """Read a run's journal (``app.show``) as a ``journal`` operation: each journalled
    step's position, name, status and a digest of its result."""
    client.invoke("journal", {"run": run_id})
    with _unknown_outcome(client):
        detail = app.show(run_id)
    steps = {
        s.pos: {"name": s.name, "status": s.status, "digest": _digest(s.result)}
        for s in detail.steps
    }
    return client.ok({"run": run_id, "steps": steps})
