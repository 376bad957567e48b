"""Values read back from the journal come back as the type the code declared.

A step's result, a workflow's result and arguments, a signal payload: each is written as
JSON and, after a crash (or in another process), read back from it. Reading goes by the
annotation the code declares (a step's return annotation, a workflow's parameters and
return annotation, ``wait_for(type=…)``), so a resumed run sees exactly the values an
uncrashed run saw. A value the journal cannot give back as it was (a dataclass returned by
a step that declares no type, a tuple from a step declared ``-> list``) is refused when it
is first written, at the step, instead of handing a resumed run another type.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Any

from .. import codec
from ..errors import DecodeError, UnsupportedTypeError

__all__ = ["Params", "annotation_of", "check_same", "params_of", "read"]

_EXACT = (int, str, bool, type(None))  # JSON gives these back as they were


def annotation_of(fn: Callable[..., Any], where: str) -> Any:
    """``fn``'s checked return annotation (``Any`` when it declares none).

    Raises:
        UnsupportedTypeError: the annotation cannot be rebuilt from JSON safely.
    """
    if not getattr(fn, "__annotations__", None):
        return Any
    return codec.return_annotation(fn, where=where)


def read(text: str | None, ann: Any, where: str) -> Any:
    """Journal text decoded as ``ann`` (``Any``: as ``codec.loads`` decodes it).

    Raises:
        DecodeError: the stored data does not fit ``ann``.
    """
    if ann is Any:
        return codec.loads(text or "null")
    return codec.loads_as(text or "null", ann, where=where)


def check_same(value: Any, text: str, ann: Any, where: str) -> Any:
    """The value a run sees: ``value``, refused if reading ``text`` back as ``ann`` would
    not give it back.

    Under an annotation the value read back is returned: equal to ``value`` and of the
    same types throughout, except that an int where ``float`` is declared (PEP 484's
    numeric tower) is a float, as every replay will see it.

    Raises:
        UnsupportedTypeError: naming where the value read back differs and what to declare.
    """
    t = type(value)
    if t in _EXACT and (ann is Any or ann is t):
        return value  # the commonest results: nothing to decode
    try:
        back = read(text, ann, where)
    except DecodeError as exc:
        raise UnsupportedTypeError(
            _text(ann), exc.path, f"{_what(value)} does not fit it ({exc})", where
        ) from None
    diff = mismatch(value, back, "$")
    if diff is None:
        return value if ann is Any else back
    path, mine, theirs = diff
    hint = (
        f"declare the return type (-> {type(value).__qualname__}) or register the class "
        "with surefoot.codec.register()"
        if ann is Any
        else "return a value of the declared type, or declare the type returned"
    )
    raise UnsupportedTypeError(
        _text(ann),
        path,
        f"the value has {mine} there, which reads back from the journal as {theirs}, so a "
        f"resumed run would see another value; {hint}",
        where,
    )


def _what(value: Any) -> str:
    return f"the value returned (a {type(value).__qualname__})"


def _text(ann: Any) -> str:
    return ann.__qualname__ if isinstance(ann, type) else repr(ann).replace("typing.", "")


def mismatch(a: Any, b: Any, path: str) -> tuple[str, str, str] | None:
    """Where ``a`` and ``b`` first differ in type or value: ``(path, a's, b's)``, or None."""
    ta, tb = type(a), type(b)
    if ta is int and tb is float and a == b:
        return None  # an int returned for a declared float: the run sees the float
    if ta is not tb:
        return path, f"a {ta.__qualname__}", f"a {tb.__qualname__}"
    if ta is dict:
        keys = {k: k for k in b}  # b's own key objects, to compare their types
        for k, v in a.items():
            if k not in keys or type(keys[k]) is not type(k):
                found = next((repr(x) for x in b if str(x) == str(k)), None)
                got = f"the key {found}" if found else "no such key"
                return f"{path}[{k!r}]", f"the key {k!r}", got
            diff = mismatch(v, b[k], f"{path}[{k!r}]")
            if diff:
                return diff
        if len(a) != len(b):
            return path, f"{len(a)} keys", f"{len(b)} keys"
        return None
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return path, f"{len(a)} items", f"{len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            diff = mismatch(x, y, f"{path}[{i}]")
            if diff:
                return diff
        return None
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for f in dataclasses.fields(a):
            diff = mismatch(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
            if diff:
                return diff
        return None
    fields = getattr(ta, "model_fields", None)
    if isinstance(fields, dict) and hasattr(ta, "model_validate"):
        for name in fields:
            diff = mismatch(getattr(a, name), getattr(b, name), f"{path}.{name}")
            if diff:
                return diff
        return None
    if isinstance(a, set | frozenset):
        if a != b or {type(x) for x in a} != {type(x) for x in b}:
            return path, f"{_short(a)}", f"{_short(b)}"
        return None
    if a != b:
        return path, _short(a), _short(b)
    return None


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


# -- a workflow's parameters ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Params:
    """A workflow's signature and the annotation of each parameter that declares one."""

    signature: inspect.Signature | None
    hints: dict[str, Any]

    def decode(self, args: list[Any], kwargs: dict[str, Any], where: str) -> tuple[Any, Any]:
        """The stored arguments (as ``codec.loads`` gave them) rebuilt by annotation."""
        if not self.hints or self.signature is None:
            return args, kwargs
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            return args, kwargs  # the call fails as a plain call would
        for name, value in bound.arguments.items():
            ann = self.hints.get(name)
            if ann is None:
                continue
            kind = self.signature.parameters[name].kind
            at = f"argument {name!r} of {where}"
            if kind is inspect.Parameter.VAR_POSITIONAL:
                bound.arguments[name] = tuple(codec.decode_as(v, ann, where=at) for v in value)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                bound.arguments[name] = {
                    k: codec.decode_as(v, ann, where=at) for k, v in value.items()
                }
            else:
                bound.arguments[name] = codec.decode_as(value, ann, where=at)
        return list(bound.args), dict(bound.kwargs)


def params_of(fn: Callable[..., Any], where: str) -> Params:
    """``fn``'s parameter annotations, checked (none: arguments come back as decoded).

    Raises:
        UnsupportedTypeError: a parameter's annotation cannot be rebuilt from JSON safely.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return Params(None, {})
    if not getattr(fn, "__annotations__", None):
        return Params(sig, {})
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raw = ", ".join(f"{k}: {v}" for k, v in fn.__annotations__.items())
        raise UnsupportedTypeError(
            raw, "", f"the annotations cannot be resolved ({exc})", where
        ) from None
    out: dict[str, Any] = {}
    for name in sig.parameters:
        if name in hints and hints[name] is not Any:
            codec.check_annotation(hints[name], where=f"argument {name!r} of {where}")
            out[name] = hints[name]
    return Params(sig, out)
