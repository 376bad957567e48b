"""Decode JSON as a given type annotation: the type comes from the code, never from the data.

``codec.loads`` rebuilds a tagged object only if its class was registered; elsewhere a
dataclass comes back as the dict of its fields, a NamedTuple as a list, a ``dict[int, …]``
with string keys. Reading by annotation restores exactly the type the function declared::

    value = decode_as(loads(text), list[Finding])      # or loads_as(text, list[Finding])
    check_annotation(Finding)                          # at decoration time: fails early

Supported: ``Any``/``object`` (as decoded), None, bool, int, float, str, bytes, Decimal,
UUID, datetime, date, time, timedelta, enums, dataclasses, pydantic models (recognised by
``model_validate``, never imported here), NamedTuples, ``NewType``, ``Literal``,
``Optional``/``Union``, ``Annotated``, and ``list``/``tuple``/``set``/``frozenset``/``dict``
of these (dict keys: str, int, float, bool, or str/int enums). Anything else is an
:class:`~surefoot.errors.UnsupportedTypeError` from :func:`check_annotation`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import types
import typing
import uuid
import weakref
from typing import Any

from ..errors import DecodeError, UnsupportedTypeError
from ._json import TAG, error_from_data, object_hook, type_name

__all__ = ["check_annotation", "decode_as", "loads_as", "return_annotation"]

_SCALARS: dict[Any, str] = {
    dt.datetime: "datetime",
    dt.date: "date",
    dt.time: "time",
    dt.timedelta: "timedelta",
    decimal.Decimal: "decimal",
    uuid.UUID: "uuid",
    bytes: "bytes",
}
_JSON = (str, int, float, bool, type(None))
_BARE = (list, tuple, set, frozenset, dict)
_KEYS = (str, int, float, bool)


def _text(ann: Any) -> str:
    if isinstance(ann, type):
        return ann.__qualname__
    return repr(ann).replace("typing.", "")


def _is_pydantic(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_validate") and hasattr(tp, "model_fields")


def _is_namedtuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


_hint_cache: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def _hints(tp: type, where: str | None) -> dict[str, Any]:
    """The resolved field annotations of a class (cached: ``get_type_hints`` is slow)."""
    hints = _hint_cache.get(tp)
    if hints is not None:
        return hints
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception as exc:  # NameError for a forward reference that does not resolve
        raise UnsupportedTypeError(
            _text(tp), tp.__qualname__, f"its annotations cannot be resolved ({exc})", where
        ) from None
    _hint_cache[tp] = hints
    return hints


def _strip(ann: Any) -> Any:
    """Drop ``Annotated`` metadata and ``NewType`` wrappers."""
    while True:
        if typing.get_origin(ann) is typing.Annotated:
            ann = typing.get_args(ann)[0]
        elif isinstance(ann, typing.NewType):
            ann = ann.__supertype__
        else:
            return ann


# -- checking an annotation ------------------------------------------------------------------

_checked: dict[Any, bool] = {}


def check_annotation(annotation: Any, *, where: str | None = None) -> None:
    """Raise :class:`UnsupportedTypeError` if values of ``annotation`` cannot be rebuilt safely.

    Call it when a function is decorated, so a wrong annotation fails at import, not after
    the first crash. Dataclass, NamedTuple and nested container annotations are checked all
    the way down (recursive types included).

    Args:
        annotation: an evaluated annotation (use :func:`return_annotation` or
            ``typing.get_type_hints`` for string annotations).
        where: what it annotates (``"step fetch"``), named in the error.
    """
    try:
        if _checked.get(annotation):
            return
        hashable = True
    except TypeError:  # unhashable metadata inside Annotated
        hashable = False
    try:
        _check(annotation, "", where, set())
    except UnsupportedTypeError as exc:
        whole = _text(annotation)
        if exc.annotation == whole:
            raise
        path = exc.path or exc.annotation  # name the part inside the whole annotation
        raise UnsupportedTypeError(whole, path, exc.reason, where) from None
    if hashable:
        _checked[annotation] = True


def _check(ann: Any, path: str, where: str | None, seen: set[int]) -> None:
    top = ann
    ann = _strip(ann)
    if ann is Any or ann is object or ann in _JSON or ann is None or ann in _SCALARS:
        return
    if ann in _BARE:
        return
    if isinstance(ann, str | typing.ForwardRef):
        raise UnsupportedTypeError(
            repr(top),
            path,
            "it is a string, not a type; evaluate it first (surefoot.codec.return_annotation "
            "or typing.get_type_hints)",
            where,
        )
    if isinstance(ann, typing.TypeVar):
        raise UnsupportedTypeError(
            _text(top), path, "a type variable says nothing about the stored value", where
        )
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Literal:
        for a in args:
            if not isinstance(a, (*_JSON, enum.Enum)):
                raise UnsupportedTypeError(_text(top), path, f"Literal value {a!r}", where)
        return
    if origin is typing.Union or origin is types.UnionType:
        for a in args:
            _check(a, path, where, seen)
        return
    if origin in (list, set, frozenset):
        if len(args) == 1:
            _check(args[0], f"{path}[...]", where, seen)
        return
    if origin is tuple:
        for a in args:
            if a is not Ellipsis:
                _check(a, f"{path}[...]", where, seen)
        return
    if origin is dict:
        if args:
            key = _strip(args[0])
            ok = (
                key in _KEYS
                or key is Any
                or (
                    isinstance(key, type)
                    and issubclass(key, enum.Enum)
                    and issubclass(key, str | int)
                )
            )
            if not ok:
                raise UnsupportedTypeError(
                    _text(top),
                    path,
                    f"JSON object keys are strings; a {_text(key)} key cannot be rebuilt (use "
                    "str, int, float, bool or a str/int enum)",
                    where,
                )
            _check(args[1], f"{path}[...]", where, seen)
        return
    if origin is not None:
        raise UnsupportedTypeError(
            _text(top),
            path,
            f"{_text(origin)}[...] is not a concrete JSON shape (use list, tuple, set, "
            "frozenset or dict)",
            where,
        )
    if not isinstance(ann, type):
        raise UnsupportedTypeError(_text(top), path, f"{ann!r} is not a type", where)
    if issubclass(ann, enum.Enum) or _is_pydantic(ann):
        return
    if dataclasses.is_dataclass(ann) or _is_namedtuple(ann):
        if id(ann) in seen:
            return
        seen.add(id(ann))
        names = (
            {f.name for f in dataclasses.fields(ann) if f.init}
            if dataclasses.is_dataclass(ann)
            else set(ann._fields)  # type: ignore[attr-defined]
        )
        for name, hint in _hints(ann, where).items():
            if name in names:
                _check(hint, f"{ann.__qualname__}.{name}", where, seen)
        return
    raise UnsupportedTypeError(
        _text(top),
        path,
        f"{type_name(ann)} is not a dataclass, pydantic model, NamedTuple or enum, so there "
        "is no known way to build one from JSON",
        where,
    )


def return_annotation(fn: Any, *, where: str | None = None) -> Any:
    """The evaluated return annotation of ``fn`` (``Any`` when there is none), checked.

    String annotations (``from __future__ import annotations``) are resolved in ``fn``'s
    module; ``async def f() -> X`` gives ``X``.
    """
    name = where or f"{getattr(fn, '__qualname__', fn)!s}"
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raw = getattr(fn, "__annotations__", {}).get("return", "?")
        raise UnsupportedTypeError(
            str(raw), "", f"the annotation cannot be resolved ({exc})", name
        ) from None
    ann = hints.get("return", Any)
    check_annotation(ann, where=name)
    return ann


# -- decoding --------------------------------------------------------------------------------


class _Obj:
    """A tagged object read from raw JSON: the stored class name, and its raw fields."""

    __slots__ = ("fields", "name")

    def __init__(self, name: str, fields: Any) -> None:
        self.name = name
        self.fields = fields


class _SetItems(list[Any]):
    """The raw items of a tagged set (kept apart from a list for Union choices)."""


def _plain(raw: Any) -> Any:
    """Raw JSON as ``codec.loads`` would have decoded it (tags applied bottom-up)."""
    if isinstance(raw, list):
        return [_plain(x) for x in raw]
    if isinstance(raw, _Obj):
        return _plain({TAG: "obj", "t": raw.name, "v": raw.fields})
    if isinstance(raw, tuple):
        return tuple(_plain(x) for x in raw)
    if isinstance(raw, dict):
        return object_hook({k: _plain(v) for k, v in raw.items()})
    return raw


def _untag(node: Any) -> Any:
    """One tagged dict of raw JSON opened, its children left raw."""
    if not isinstance(node, dict) or TAG not in node:
        return node
    tag = node.get(TAG)
    v: Any = node.get("v")
    if tag == "obj":
        return _Obj(str(node.get("t", "")), v)
    if tag in ("tuple", "set") and isinstance(v, list):
        return tuple(v) if tag == "tuple" else _SetItems(v)
    if tag == "enum":
        return v
    try:
        return error_from_data(_plain(node)) if tag == "error" else object_hook(node)
    except (ValueError, TypeError, ArithmeticError):  # a damaged tag: fails as a mismatch
        return node


def decode_as(data: Any, annotation: Any, *, where: str | None = None) -> Any:
    """``data`` rebuilt as a value of ``annotation``.

    ``data`` may be what ``codec.loads`` returned or raw ``json.loads`` output of
    ``codec.dumps`` text (then tagged class names also pick among Union members, by
    comparing names only). No class named by the data is ever imported or called: every
    type built comes from the annotation.

    Raises:
        UnsupportedTypeError: the annotation cannot be rebuilt (see :func:`check_annotation`).
        DecodeError: the data does not fit the annotation, naming where and why.
    """
    check_annotation(annotation, where=where)
    return _as(data, annotation, "$", where)


def loads_as(text: str | bytes, annotation: Any, *, where: str | None = None) -> Any:
    """Decode JSON text written by ``codec.dumps`` as a value of ``annotation``."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8")
    return decode_as(json.loads(text), annotation, where=where)


def _fail(ann: Any, path: str, node: Any, reason: str, where: str | None) -> DecodeError:
    got = f"an object of {node.name}" if isinstance(node, _Obj) else type_name(type(node))
    return DecodeError(_text(ann), path, got, reason, where)


def _as(node: Any, ann: Any, path: str, where: str | None) -> Any:
    ann = _strip(ann)
    node = _untag(node)
    if ann is Any or ann is object:
        return _plain(node)
    if ann is None or ann is type(None):
        if node is None:
            return None
        raise _fail(ann, path, node, "expected null", where)
    origin = typing.get_origin(ann)
    if origin is not None:
        return _generic(node, ann, origin, typing.get_args(ann), path, where)
    if ann in _JSON:
        return _json_scalar(node, ann, path, where)
    if ann in _SCALARS:
        return _scalar(node, ann, path, where)
    if ann in _BARE:
        return _bare(node, ann, path, where)
    if issubclass(ann, enum.Enum):
        if isinstance(node, ann):
            return node
        try:
            return ann(_plain(node))
        except (ValueError, TypeError):
            raise _fail(
                ann, path, node, f"{node!r} is not a value of {_text(ann)}", where
            ) from None
    if _is_pydantic(ann):
        return _pydantic(node, ann, path, where)
    if isinstance(ann, type) and dataclasses.is_dataclass(ann):
        return _dataclass(node, ann, path, where)
    if _is_namedtuple(ann):
        return _namedtuple(node, ann, path, where)
    raise _fail(ann, path, node, "unsupported annotation", where)  # check_annotation stops it


def _json_scalar(node: Any, ann: type, path: str, where: str | None) -> Any:
    if ann is float and type(node) in (int, float):
        return float(node)
    if type(node) is ann:
        return node
    raise _fail(ann, path, node, f"expected {ann.__name__}", where)


def _scalar(node: Any, ann: type, path: str, where: str | None) -> Any:
    if type(node) is ann:
        return node
    try:
        if isinstance(node, str) and ann in (dt.datetime, dt.date, dt.time):
            return ann.fromisoformat(node)
        if ann is dt.timedelta and type(node) in (int, float):
            return dt.timedelta(seconds=node)
        if ann is decimal.Decimal and type(node) in (str, int):
            return decimal.Decimal(node)
        if ann is uuid.UUID and isinstance(node, str):
            return uuid.UUID(node)
        if ann is bytes and isinstance(node, bytearray):
            return bytes(node)
    except (ValueError, TypeError, decimal.InvalidOperation) as exc:
        raise _fail(ann, path, node, str(exc), where) from None
    raise _fail(ann, path, node, f"expected {ann.__name__}", where)


def _bare(node: Any, ann: type, path: str, where: str | None) -> Any:
    if ann is dict:
        if isinstance(node, dict):
            return _plain(node)
    elif isinstance(node, list | tuple | set | frozenset):
        return ann([_plain(x) for x in node])
    raise _fail(ann, path, node, f"expected {ann.__name__}", where)


def _generic(
    node: Any, ann: Any, origin: Any, args: tuple[Any, ...], path: str, where: str | None
) -> Any:
    if origin is typing.Literal:
        for a in args:
            if isinstance(a, enum.Enum):
                if node is a or (not isinstance(node, enum.Enum) and _enum_is(a, node)):
                    return a
            elif type(node) is type(a) and node == a:
                return a
        raise _fail(ann, path, node, f"{node!r} is not one of {list(args)!r}", where)
    if origin is typing.Union or origin is types.UnionType:
        return _union(node, ann, args, path, where)
    item = args[0] if args else Any
    if origin in (list, set, frozenset):
        if not isinstance(node, list | tuple | set | frozenset):
            raise _fail(ann, path, node, f"expected a {origin.__name__}", where)
        out = [_as(x, item, f"{path}[{i}]", where) for i, x in enumerate(node)]
        return out if origin is list else origin(out)
    if origin is tuple:
        if not isinstance(node, list | tuple):
            raise _fail(ann, path, node, "expected a tuple", where)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_as(x, args[0], f"{path}[{i}]", where) for i, x in enumerate(node))
        if args == ((),):
            args = ()
        if len(node) != len(args):
            raise _fail(ann, path, node, f"expected {len(args)} items, found {len(node)}", where)
        return tuple(
            _as(x, a, f"{path}[{i}]", where)
            for i, (x, a) in enumerate(zip(node, args, strict=True))
        )
    if origin is dict:
        if not isinstance(node, dict):
            raise _fail(ann, path, node, "expected a dict", where)
        kt, vt = args if args else (Any, Any)
        return {_key(k, kt, path, where): _as(v, vt, f"{path}.{k}", where) for k, v in node.items()}
    raise _fail(ann, path, node, "unsupported annotation", where)


def _enum_is(member: enum.Enum, node: Any) -> bool:
    try:
        return type(member)(node) is member
    except (ValueError, TypeError):
        return False


def _key(k: Any, kt: Any, path: str, where: str | None) -> Any:
    kt = _strip(kt)
    if kt is Any or type(k) is kt:
        return k
    try:
        if isinstance(kt, type) and issubclass(kt, enum.Enum):
            if isinstance(k, kt):
                return k
            base = int if issubclass(kt, int) else str
            return kt(base(k))
        if kt is bool and k in ("true", "false"):
            return k == "true"
        if kt in (int, float) and isinstance(k, str):
            return kt(k)
    except (ValueError, TypeError):
        pass
    raise _fail(kt, f"{path}[{k!r}]", k, f"the key {k!r} is not a {_text(kt)}", where)


def _exact(node: Any, ann: Any) -> bool:
    """True when ``node`` is already plainly of ``ann`` (first pass of a Union)."""
    ann = _strip(ann)
    if ann is Any or ann is object:
        return False
    if ann is None or ann is type(None):
        return node is None
    origin = typing.get_origin(ann) or ann
    if isinstance(node, _Obj):
        return isinstance(origin, type) and type_name(origin) == node.name
    if isinstance(node, _SetItems):
        return origin in (set, frozenset)
    if origin in _JSON or origin in _SCALARS:
        return type(node) is origin
    if origin in (set, frozenset):
        return isinstance(node, set | frozenset)
    if origin in _BARE:
        return type(node) is origin
    if isinstance(origin, type):
        return isinstance(node, origin)
    return False


def _union(node: Any, ann: Any, args: tuple[Any, ...], path: str, where: str | None) -> Any:
    first = [a for a in args if _exact(node, a)]
    reasons = []
    for a in [*first, *(a for a in args if a not in first)]:
        try:
            return _as(node, a, path, where)
        except DecodeError as exc:
            reasons.append(f"not {_text(a)} ({exc.args[0].split(': ', 1)[-1][:80]})")
    raise _fail(ann, path, node, "; ".join(reasons) or "no member matched", where)


def _fields_of(node: Any, ann: type, path: str, where: str | None) -> dict[str, Any]:
    if isinstance(node, _Obj):
        node = node.fields
    if not isinstance(node, dict):
        raise _fail(ann, path, node, f"expected the fields of {_text(ann)}", where)
    return node


def _dataclass(node: Any, ann: type, path: str, where: str | None) -> Any:
    if isinstance(node, ann):
        node = {f.name: getattr(node, f.name) for f in dataclasses.fields(ann)}
    data = _fields_of(node, ann, path, where)
    fields = {f.name: f for f in dataclasses.fields(ann)}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise _fail(ann, path, node, f"no field named {', '.join(map(repr, unknown))}", where)
    hints = _hints(ann, where)
    kwargs = {
        k: _as(v, hints.get(k, Any), f"{path}.{k}", where)
        for k, v in data.items()
        if fields[k].init
    }
    try:
        return ann(**kwargs)
    except TypeError as exc:  # a required field missing
        raise _fail(ann, path, node, str(exc), where) from None


def _namedtuple(node: Any, ann: type, path: str, where: str | None) -> Any:
    names: tuple[str, ...] = ann._fields  # type: ignore[attr-defined]
    if isinstance(node, dict):
        node = [node[n] for n in names if n in node]
    if not isinstance(node, list | tuple) or len(node) > len(names):
        raise _fail(ann, path, node, f"expected at most {len(names)} items", where)
    hints = _hints(ann, where)
    items = [
        _as(x, hints.get(n, Any), f"{path}.{n}", where) for n, x in zip(names, node, strict=False)
    ]
    try:
        return ann(*items)
    except TypeError as exc:
        raise _fail(ann, path, node, str(exc), where) from None


def _pydantic(node: Any, ann: Any, path: str, where: str | None) -> Any:
    if isinstance(node, ann):
        return node
    data = _fields_of(node, ann, path, where)
    try:
        return ann.model_validate(_plain(data))
    except Exception as exc:  # pydantic's ValidationError, without importing pydantic
        first = str(exc).splitlines()
        raise _fail(ann, path, node, " ".join(first[:3]), where) from None
