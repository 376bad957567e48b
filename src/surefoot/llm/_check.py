"""Checks on a reply's content: not empty, and valid against the schema the caller declared."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError

__all__ = ["ReplyCheck", "json_schema_errors", "make_check"]

# A check returns the parsed value, or raises ValueError with the reason.
ReplyCheck = Callable[[str], Any]

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.S)
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _strip_fence(text: str) -> str:
    m = _FENCE.match(text)
    return m.group(1) if m else text


def json_schema_errors(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """What is wrong with ``value`` under ``schema`` (empty list: valid).

    Covers the JSON Schema keywords replies are usually checked with: ``type`` (a name or
    a list), ``enum``, ``const``, ``properties``, ``required``, ``additionalProperties:
    false``, ``items``, ``minItems``/``maxItems``, ``minLength``/``maxLength``,
    ``minimum``/``maximum``. Other keywords are ignored (use a pydantic model for more).
    """
    errs: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if not any(_TYPES.get(k, lambda _v: False)(value) for k in kinds):
            return [f"{path}: expected {' or '.join(kinds)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        errs.append(f"{path}: expected {schema['const']!r}, got {value!r}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errs.append(f"{path}: missing required property {name!r}")
        for name, sub in props.items():
            if name in value:
                errs += json_schema_errors(value[name], sub, f"{path}.{name}")
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(props))
            if extra:
                errs.append(f"{path}: unexpected properties {extra!r}")
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                errs += json_schema_errors(item, items, f"{path}[{i}]")
        if len(value) < schema.get("minItems", 0):
            errs.append(f"{path}: {len(value)} items, fewer than minItems={schema['minItems']}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errs.append(f"{path}: {len(value)} items, more than maxItems={schema['maxItems']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errs.append(f"{path}: shorter than minLength={schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errs.append(f"{path}: longer than maxLength={schema['maxLength']}")
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            errs.append(f"{path}: {value!r} is below minimum={schema['minimum']!r}")
        if "maximum" in schema and value > schema["maximum"]:
            errs.append(f"{path}: {value!r} is above maximum={schema['maximum']!r}")
    return errs


def _parse_json(text: str) -> Any:
    try:
        return json.loads(_strip_fence(text))
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None


def make_check(schema: Any) -> ReplyCheck | None:
    """Turn what the caller declared into a check.

    Args:
        schema: None (no check), a JSON Schema (a dict), a pydantic model class (its
            ``model_validate_json``), or ``callable(text) -> value`` raising ValueError.

    Raises:
        ConfigError: anything else.
    """
    if schema is None:
        return None
    if isinstance(schema, Mapping):
        if not schema:
            raise ConfigError("schema={} checks nothing; pass None or a JSON Schema with a type")
        sch = dict(schema)

        def by_schema(text: str) -> Any:
            value = _parse_json(text)
            errs = json_schema_errors(value, sch)
            if errs:
                raise ValueError("; ".join(errs[:5]))
            return value

        return by_schema
    validate = getattr(schema, "model_validate_json", None)
    if isinstance(schema, type) and callable(validate):

        def by_model(text: str) -> Any:
            try:
                return validate(_strip_fence(text))
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                lines = str(exc).splitlines()
                raise ValueError(" ".join(x.strip() for x in lines[:4])) from None

        return by_model
    if callable(schema):
        return schema  # type: ignore[no-any-return]
    raise ConfigError(
        f"schema must be a JSON Schema dict, a pydantic model class or callable(text) -> value, "
        f"got {schema!r}"
    )
