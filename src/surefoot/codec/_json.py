"""The JSON encoder and decoder with surefoot's tags (see the package docstring)."""

from __future__ import annotations

import base64
import builtins
import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from .. import errors as _errors
from ..errors import EncodeError, RecordedError

__all__ = [
    "TAG",
    "Encoder",
    "dumps",
    "error_from_data",
    "error_to_data",
    "loads",
    "object_hook",
    "register",
    "type_name",
]

TAG = "$sf"
_registry: dict[str, type] = {}


def type_name(tp: type) -> str:
    """Return ``module.QualName`` for a type, as stored in tags."""
    return f"{tp.__module__}.{tp.__qualname__}"


def register(cls: type, *, former: Iterable[str] = ()) -> type:
    """Let tagged values of ``cls`` (a dataclass, pydantic model or enum) decode to ``cls``.

    Usable as a class decorator. Returns ``cls`` unchanged.

    Args:
        former: the tags (``module.QualName``) the class was stored under before it moved,
            so values written then still decode to it; new values carry its current name.
    """
    _registry[type_name(cls)] = cls
    for name in former:
        _registry[name] = cls
    return cls


def _default(o: Any) -> Any:
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        fields = {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
        return {TAG: "obj", "t": type_name(type(o)), "v": fields}
    dump = getattr(o, "model_dump", None)
    if dump is not None and callable(dump) and hasattr(type(o), "model_fields"):
        return {TAG: "obj", "t": type_name(type(o)), "v": dump(mode="json")}
    if isinstance(o, enum.Enum):  # str- and int-based enums never get here: JSON writes them
        return {TAG: "enum", "t": type_name(type(o)), "v": o.value}
    if isinstance(o, dt.datetime):
        return {TAG: "datetime", "v": o.isoformat()}
    if isinstance(o, dt.date):
        return {TAG: "date", "v": o.isoformat()}
    if isinstance(o, dt.time):
        return {TAG: "time", "v": o.isoformat()}
    if isinstance(o, dt.timedelta):
        return {TAG: "timedelta", "v": o.total_seconds()}
    if isinstance(o, bytes | bytearray | memoryview):
        return {TAG: "bytes", "v": base64.b64encode(bytes(o)).decode("ascii")}
    if isinstance(o, set | frozenset):
        items = list(o)
        try:
            items.sort()
        except TypeError:
            pass
        return {TAG: "set", "v": items}
    if isinstance(o, decimal.Decimal):
        return {TAG: "decimal", "v": str(o)}
    if isinstance(o, uuid.UUID):
        return {TAG: "uuid", "v": str(o)}
    raise TypeError(type_name(type(o)))


def _tuples(o: Any) -> Any:
    """json.dumps turns tuples into lists; tag them first only when there are any."""
    if isinstance(o, tuple) and not hasattr(o, "_fields"):
        return {TAG: "tuple", "v": [_tuples(x) for x in o]}
    if isinstance(o, list):
        return [_tuples(x) for x in o]
    if isinstance(o, dict):
        return {k: _tuples(v) for k, v in o.items()}
    return o


_encoder = json.JSONEncoder(
    default=_default, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
# The C encoder behind _encoder, made once: JSONEncoder.encode builds a new one per call.
# No markers (cycle check): a cycle ends in RecursionError, which dumps reports as one.
_c_encode = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    if getattr(json.encoder, "c_make_encoder", None) is not None
    else None
)


def dumps(value: Any, *, where: str | None = None) -> str:
    """Encode ``value`` as compact JSON text.

    Args:
        value: plain data, dataclasses, pydantic models, datetimes, bytes, sets, tuples.
        where: what is being encoded (a step name, a key), named in the error.

    Raises:
        EncodeError: naming the type and where it was found; nothing is half-written.
    """
    try:
        t = type(value)
        if t is int:  # the commonest step result: what the encoder writes, without building one
            return int.__repr__(value)
        if value is None or t is str or t is bool or t is float or isinstance(value, _SCALAR):
            return _encoder.encode(value)
        if _has_tuple(value):
            value = _tuples(value)
        if _c_encode is not None and (t is dict or t is list):
            return "".join(_c_encode(value, 0))
        return _encoder.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        path, tname = _find_bad(value, "$")
        raise EncodeError(tname or str(exc), path, where) from None


def dumps_json_values(value: Any) -> str | None:
    """``value``'s JSON text when it is made of JSON's own types and reads back equal (a
    dict or a list whose text ``loads`` gives back ``==`` to it); None when it is not, or
    may not be, and ``dumps`` must encode it (a tuple, a non-``str`` key, a tagged value,
    NaN, an object the encoder refuses).

    One C encode and one C decode, no walk in Python: for values a JSON codec produced
    (pydantic's ``mode='json'``), which hold no subclass of ``int`` or ``str`` (an
    ``IntEnum`` reads back equal but as another type: its caller must not pass one).
    """
    if _c_encode is None or type(value) not in (dict, list):
        return None
    try:
        text = "".join(_c_encode(value, 0))
    except (TypeError, ValueError, RecursionError):
        return None
    if TAG in text:
        return None
    try:
        back, end = _scan(text, 0)
    except (StopIteration, ValueError):
        return None
    return text if end == len(text) and back == value else None


_SCALAR = (str, int, float, bool)
_NESTED = (list, tuple, dict)


def _has_tuple(o: Any, depth: int = 0) -> bool:
    if isinstance(o, tuple):
        return True
    if depth > 64:
        return False
    if isinstance(o, list | dict):
        for x in o.values() if isinstance(o, dict) else o:  # a loop: no generator per call
            if isinstance(x, _NESTED) and _has_tuple(x, depth + 1):
                return True
    return False


def _find_bad(o: Any, path: str, depth: int = 0) -> tuple[str, str | None]:
    """Walk ``o`` to find the first value the encoder refuses (slow path, errors only)."""
    if depth > 200:
        return path, "a structure nested too deeply (or a cycle)"
    if o is None or isinstance(o, str | bool | int):
        return "", None
    if isinstance(o, float):
        return (path, "float (NaN or infinity)") if o != o or o in (_INF, -_INF) else ("", None)
    if isinstance(o, dict):
        for k, v in o.items():
            if not isinstance(k, str | int | float | bool) and k is not None:
                return f"{path}[{k!r}]", f"dict key of type {type_name(type(k))}"
            p, t = _find_bad(v, f"{path}.{k}", depth + 1)
            if t:
                return p, t
        return "", None
    if isinstance(o, list | tuple):
        for i, v in enumerate(o):
            p, t = _find_bad(v, f"{path}[{i}]", depth + 1)
            if t:
                return p, t
        return "", None
    try:
        inner = _default(o)
    except TypeError:
        return path, type_name(type(o))
    if isinstance(inner, dict) and "v" in inner:
        p, t = _find_bad(inner["v"], path, depth + 1)
        return p, t
    return "", None


_INF = float("inf")


def object_hook(d: dict[str, Any]) -> Any:
    tag = d.get(TAG)
    if tag is None:
        return d
    v: Any = d.get("v")
    if tag == "obj":
        cls = _registry.get(d.get("t", ""))
        if cls is None:
            return v
        validate = getattr(cls, "model_validate", None)
        if validate is not None:
            return validate(v)
        return cls(**v)
    if tag == "enum":
        cls = _registry.get(d.get("t", ""))
        return cls(v) if cls is not None else v
    if tag == "datetime":
        return dt.datetime.fromisoformat(v)
    if tag == "date":
        return dt.date.fromisoformat(v)
    if tag == "time":
        return dt.time.fromisoformat(v)
    if tag == "timedelta":
        return dt.timedelta(seconds=v)
    if tag == "bytes":
        return base64.b64decode(v)
    if tag == "set":
        return set(v)
    if tag == "tuple":
        return tuple(v)
    if tag == "decimal":
        return decimal.Decimal(v)
    if tag == "uuid":
        return uuid.UUID(v)
    if tag == "error":
        return error_from_data(d)
    return d


_decoder = json.JSONDecoder(object_hook=object_hook)
_plain = json.JSONDecoder()
_scan = _plain.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__


def loads(text: str | bytes) -> Any:
    """Decode JSON text written by :func:`dumps`."""
    if type(text) is not str and isinstance(text, bytes | bytearray):
        text = text.decode("utf-8")
    # Text without a tag (dumps writes TAG as is) decodes without calling the hook per dict.
    if TAG not in text:
        try:  # the C scanner straight away: text written by dumps has no padding
            value, end = _scan(text, 0)
            if end == len(text):
                return value
        except (StopIteration, ValueError):
            pass  # leading space or bad JSON: decode() says what is wrong
        return _plain.decode(text)
    return _decoder.decode(text)


def error_to_data(exc: BaseException) -> dict[str, Any]:
    """Describe an exception as JSON-safe data: type, message, and encodable attributes."""
    attrs: dict[str, Any] = {}
    for k, v in vars(exc).items():
        if k.startswith("_"):
            continue
        try:
            dumps(v)
        except EncodeError:
            continue
        attrs[k] = v
    args = []
    for a in exc.args:
        try:
            dumps(a)
            args.append(a)
        except EncodeError:
            args.append(repr(a))
    return {
        TAG: "error",
        "t": type_name(type(exc)),
        "message": str(exc),
        "args": args,
        "attrs": attrs,
    }


def _rebuildable(name: str) -> type[BaseException] | None:
    """Only builtins, surefoot's own errors and registered classes are rebuilt."""
    mod, _, qual = name.rpartition(".")
    cls: Any = None
    if mod == "builtins":
        cls = getattr(builtins, qual, None)
    elif mod == "surefoot.errors":
        cls = getattr(_errors, qual, None)
    else:
        cls = _registry.get(name)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        return cls
    return None


def error_from_data(d: dict[str, Any]) -> BaseException:
    """Rebuild an exception described by :func:`error_to_data`.

    Builtin exceptions, surefoot errors and registered exception classes come back as
    themselves (with their attributes); any other type comes back as ``RecordedError``.
    """
    name = d.get("t", "builtins.Exception")
    cls = _rebuildable(name)
    exc: BaseException
    if cls is not None:
        try:
            exc = cls.__new__(cls)
            BaseException.__init__(exc, *d.get("args", []))
            for k, v in d.get("attrs", {}).items():
                setattr(exc, k, v)
            return exc
        except Exception:  # any failure to rebuild falls back to RecordedError
            pass
    return RecordedError(name, d.get("message", ""))


Encoder = Callable[[Any], str]
