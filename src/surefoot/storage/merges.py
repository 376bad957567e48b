"""Merges applied by the store: the operations, their log, and their Python implementation.

A merge sends the store a contribution instead of a whole value, and the store combines it
with the key's current value in one atomic step, so writers that only add never conflict.
Memory and SQLite run :func:`apply` under their lock or write transaction (so a
user-supplied ``reduce`` function can run there); PostgreSQL spells the same rules in a
PL/pgSQL function and Redis in a Lua script.

=========  ============================================  =====================================
op         contribution                                  new value
=========  ============================================  =====================================
append     any value                                     the list with it at the end
set_add    a string or an int                            the list with it, unless it is there
add        a number                                      current + contribution
max / min  a number                                      the larger / smaller
merge      a dict                                        the dict updated with it (top level)
reduce     any value (memory and SQLite only)            ``reducer(current, contribution)``
=========  ============================================  =====================================

A key holding merges keeps a log beside its value: one entry per contribution,
``[author, trust, at, id]`` plus the contribution itself for the ops that fold it into one
value (for ``append`` and ``set_add`` the value's item is the contribution). A contribution
with an ``id`` the log already has is a duplicate: nothing changes (a retried append is
applied once). The key's ``trust`` is the lowest trust of what it holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..codec import dumps, loads
from ..errors import ConfigError

__all__ = [
    "LIST_OPS",
    "OPS",
    "Reducer",
    "apply",
    "check_contribution",
    "log_entry",
    "lower_trust",
    "merge_refused",
]

OPS = ("append", "set_add", "add", "max", "min", "merge", "reduce")
LIST_OPS = ("append", "set_add")
_quote = json.encoder.encode_basestring_ascii  # what json.dumps(str) writes
NUMBER_OPS = ("add", "max", "min")
_RANK = {"untrusted": 0, "trusted": 1, "system": 2}

Reducer = Callable[[Any, Any], Any]


def lower_trust(a: str | None, b: str) -> str:
    """The lower of two trust labels (``None``: no current value)."""
    if a is None:
        return b
    return a if _RANK.get(a, 0) <= _RANK.get(b, 0) else b


def check_contribution(key: str, op: str, arg: str) -> Any:
    """Refuse a contribution ``op`` cannot combine; return it as raw JSON data.

    Raises:
        ConfigError: an unknown op, or a contribution of the wrong kind, naming both.
    """
    if op not in OPS:
        raise ConfigError(f"unknown merge {op!r} for key {key!r}; use one of {', '.join(OPS)}")
    data = json.loads(arg)
    if op in NUMBER_OPS and (isinstance(data, bool) or not isinstance(data, int | float)):
        raise ConfigError(f"merge {op!r} on key {key!r} needs a number, got {arg[:80]}")
    if op == "set_add" and (isinstance(data, bool) or not isinstance(data, str | int)):
        raise ConfigError(
            f"merge 'set_add' on key {key!r} needs a string or an int (members are compared "
            f"exactly on every backend), got {arg[:80]}"
        )
    if op == "merge" and (not isinstance(data, dict) or "$sf" in data):
        raise ConfigError(f"merge 'merge' on key {key!r} needs a dict, got {arg[:80]}")
    return data


def log_entry(author: str, trust: str, now: float, merge_id: str | None, op: str, arg: str) -> str:
    """One log entry as JSON text: ``[author, trust, at, id]`` (+ the contribution)."""
    # json.dumps of a str is encode_basestring_ascii (C); a call to it skips the encoder.
    mid = "null" if merge_id is None else _quote(merge_id)
    head = f"[{_quote(author)},{_quote(trust)},{float(now)!r},{mid}"
    return head + "]" if op in LIST_OPS else f"{head},{arg}]"


def _splice(items: str | None, item: str) -> str:
    """``items`` (a compact JSON list made here, or None) with ``item`` appended."""
    if items is None or items == "[]":
        return "[" + item + "]"
    return items[:-1] + "," + item + "]"


def _kind_error(key: str, op: str, value: Any) -> ConfigError:
    return ConfigError(
        f"key {key!r} holds {type(value).__name__} {json.dumps(value)[:60]}, which merge "
        f"{op!r} cannot combine; nothing was written"
    )


def merge_refused(
    key: str, op: str, url: str, kind: str = "reduce", current: Any = None
) -> ConfigError:
    """The error for a merge a server backend refused (``kind`` says why).

    Args:
        key: the key. op: the merge asked for. url: the store.
        kind: ``reduce`` (the backend cannot run Python), ``op`` (the key is plain or merges
            by another op), ``kind`` (its value cannot be combined by ``op``).
        current: the key's ``StateRecord`` as stored, for the message.
    """
    if kind == "reduce":
        return ConfigError(
            f"merge 'reduce' on key {key!r} runs a Python function inside the store, which "
            f"only memory:// and sqlite:/// can do, not {url!r}; use a built-in merge "
            "(append, set_add, add, max, min, merge), or Store.update(key, fn) (expect= "
            "under a RetryPolicy)"
        )
    cur_op = getattr(current, "merge_op", None)
    state = (current.value, cur_op, current.merge_log) if current is not None else None
    try:
        apply(key, op, state, "null" if op == "append" else _probe(op), "[]", None)
    except ConfigError as exc:
        return exc
    return ConfigError(f"merge {op!r} on key {key!r} was refused by {url!r} ({kind})")


def _probe(op: str) -> str:
    """A contribution valid for ``op``, to reproduce a server's refusal in Python."""
    return {"set_add": "0", "merge": "{}"}.get(op, "0")


def apply(
    key: str,
    op: str,
    current: tuple[str, str | None, str | None] | None,
    arg: str,
    entry: str,
    merge_id: str | None,
    reducer: Reducer | None = None,
) -> tuple[str, str] | None:
    """Combine ``arg`` into the key's current value.

    Args:
        key: the key (for errors). op: one of :data:`OPS`.
        current: ``(value, merge_op, merge_log)`` as stored, or None when the key is new.
        arg: the contribution, codec JSON. entry: its :func:`log_entry`.
        merge_id: the contribution's id (None: never a duplicate by id).
        reducer: the function of ``reduce``.

    Returns:
        ``(new value, new log)`` as JSON text, or None when the contribution is a duplicate.

    Raises:
        ConfigError: the key holds a plain value (written, not merged) or merges by another
            op, or its value is of a kind ``op`` cannot combine.
    """
    data = check_contribution(key, op, arg)
    value: str | None = None
    log: str | None = None
    if current is not None:
        value, cur_op, log = current
        if cur_op is None:
            raise ConfigError(
                f"key {key!r} holds a value written with write(), not merged; merges combine "
                "only what merges made. Merge into a new key, or write the combined value "
                "with expect=version; nothing was written"
            )
        if cur_op != op:
            raise ConfigError(
                f"key {key!r} merges by {cur_op!r}, not {op!r}: declare one merge per key "
                "pattern; nothing was written"
            )
    if merge_id is not None and log is not None and any(e[3] == merge_id for e in json.loads(log)):
        return None
    new_log = _splice(log, entry)
    if op == "append":
        return _splice(value, arg), new_log
    if op == "set_add":
        members = json.loads(value) if value is not None else []
        if any(type(m) is type(data) and m == data for m in members):
            return None
        return _splice(value, json.dumps(data)), new_log
    cur = json.loads(value) if value is not None else None
    if op in NUMBER_OPS:
        if cur is None:
            return json.dumps(data), new_log
        if isinstance(cur, bool) or not isinstance(cur, int | float):
            raise _kind_error(key, op, cur)
        total = cur + data if op == "add" else max(cur, data) if op == "max" else min(cur, data)
        return json.dumps(total), new_log
    if op == "merge":
        if cur is None:
            cur = {}
        if not isinstance(cur, dict):
            raise _kind_error(key, op, cur)
        cur.update(data)
        return json.dumps(cur, separators=(",", ":")), new_log
    if reducer is None:
        raise ConfigError(f"merge 'reduce' on key {key!r} needs its reducer function")
    old = loads(value) if value is not None else None
    return dumps(reducer(old, loads(arg)), where=f"key {key!r}"), new_log
