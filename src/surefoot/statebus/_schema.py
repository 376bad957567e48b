"""Schemas per key pattern: a dict spec, a pydantic model class, or a callable validator."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, SchemaViolationError

__all__ = ["Schema", "compile_schema"]

Schema = Callable[[str, Any], None]
"""A compiled schema: ``check(key, value)`` raises ``SchemaViolationError`` or returns."""

_TYPE_NAMES = {
    "str": str,
    "string": str,
    "int": int,
    "integer": int,
    "float": float,
    "number": float,
    "bool": bool,
    "boolean": bool,
    "list": list,
    "array": list,
    "dict": dict,
    "object": dict,
}


def _type_ok(value: Any, tp: type) -> bool:
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _as_type(spec: Any, where: str) -> type:
    if isinstance(spec, type):
        return spec
    if isinstance(spec, str) and spec in _TYPE_NAMES:
        return _TYPE_NAMES[spec]
    raise ConfigError(
        f"schema field {where!r}: type must be a Python type or one of "
        f"{sorted(_TYPE_NAMES)}, got {spec!r}"
    )


def _field_check(name: str, spec: Any) -> Callable[[str, Any], None]:
    """Compile one field spec: a type, or ``{"type": …, "enum": […], "max_length": n,
    "pattern": regex}``."""
    if not isinstance(spec, dict):
        spec = {"type": spec}
    tp = _as_type(spec["type"], name) if "type" in spec else None
    enum = list(spec["enum"]) if "enum" in spec else None
    max_len = spec.get("max_length")
    pattern = re.compile(spec["pattern"]) if "pattern" in spec else None

    def check(key: str, value: Any) -> None:
        if tp is not None and not _type_ok(value, tp):
            raise SchemaViolationError(
                key, name, f"expected {tp.__name__}, got {type(value).__name__} {value!r:.60}"
            )
        if enum is not None and value not in enum:
            raise SchemaViolationError(key, name, f"{value!r:.60} is not one of {enum}")
        if max_len is not None and len(value) > max_len:
            raise SchemaViolationError(key, name, f"length {len(value)} exceeds {max_len}")
        if pattern is not None and (not isinstance(value, str) or not pattern.fullmatch(value)):
            raise SchemaViolationError(
                key, name, f"{value!r:.60} does not match pattern {pattern.pattern!r}"
            )

    return check


def _dict_schema(spec: dict[str, Any]) -> Schema:
    kind = spec.get("type", "object")
    if kind in ("list", "array", list):
        item = _field_check("[]", spec["items"]) if "items" in spec else None
        max_items = spec.get("max_items")

        def check_list(key: str, value: Any) -> None:
            if not isinstance(value, list):
                raise SchemaViolationError(key, "$", f"expected a list, got {type(value).__name__}")
            if max_items is not None and len(value) > max_items:
                raise SchemaViolationError(key, "$", f"{len(value)} items exceed {max_items}")
            if item is not None:
                for i, v in enumerate(value):
                    try:
                        item(key, v)
                    except SchemaViolationError as exc:
                        raise SchemaViolationError(key, f"[{i}]", exc.reason) from None

        return check_list
    if kind not in ("object", "dict", dict):
        return _field_check("$", spec)
    fields = {name: _field_check(name, f) for name, f in spec.get("fields", {}).items()}
    required = list(spec.get("required", []))
    additional = bool(spec.get("additional", True))
    for r in required:
        if r not in fields and not additional:
            raise ConfigError(f"schema requires field {r!r} but does not declare it in 'fields'")

    def check_obj(key: str, value: Any) -> None:
        if not isinstance(value, dict):
            raise SchemaViolationError(
                key, "$", f"expected an object (dict), got {type(value).__name__}"
            )
        for r in required:
            if r not in value:
                raise SchemaViolationError(key, r, "required field is missing")
        for name, v in value.items():
            f = fields.get(name)
            if f is not None:
                f(key, v)
            elif not additional:
                raise SchemaViolationError(
                    key, name, f"field is not in the schema (allowed: {sorted(fields)})"
                )

    return check_obj


def compile_schema(schema: Any) -> Schema:
    """Turn a dict spec, a pydantic model class or a callable into ``check(key, value)``.

    A dict spec is ``{"type": "object", "fields": {"title": str, "status": {"enum": [...]}},
    "required": [...], "additional": False}`` or ``{"type": "list", "items": …}``. A callable
    validator gets the value and returns None or True to accept, False or a string (the
    reason) to reject, or raises ``ValueError``/``TypeError``.

    Raises:
        ConfigError: the schema itself is malformed.
    """
    if isinstance(schema, dict):
        return _dict_schema(schema)
    validate = getattr(schema, "model_validate", None)
    if isinstance(schema, type) and callable(validate):

        def check_model(key: str, value: Any) -> None:
            try:
                validate(value)
            except ValueError as exc:  # pydantic.ValidationError is a ValueError
                errs = getattr(exc, "errors", None)
                if callable(errs):
                    first = errs()[0]
                    loc = ".".join(str(p) for p in first.get("loc", ())) or "$"
                    raise SchemaViolationError(key, loc, str(first.get("msg"))) from None
                raise SchemaViolationError(key, "$", str(exc)) from None

        return check_model
    if callable(schema):
        fn = schema

        def check_fn(key: str, value: Any) -> None:
            try:
                ok = fn(value)
            except (ValueError, TypeError) as exc:
                raise SchemaViolationError(key, "$", str(exc)) from None
            if ok is False or isinstance(ok, str):
                reason = ok if isinstance(ok, str) else f"rejected by validator {fn!r}"
                raise SchemaViolationError(key, "$", reason)

        return check_fn
    raise ConfigError(
        f"a schema must be a dict spec, a pydantic model class or a callable, got {schema!r}"
    )
