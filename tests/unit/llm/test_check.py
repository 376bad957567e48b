"""Reply checks: the JSON Schema subset, fenced JSON, and what the caller may declare."""

from __future__ import annotations

import pytest

from surefoot.errors import ConfigError
from surefoot.llm import json_schema_errors
from surefoot.llm._check import make_check

SCHEMA = {
    "type": "object",
    "required": ["name", "tags"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "kind": {"enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
}


def test_valid_value_has_no_errors() -> None:
    """A value matching every keyword gives an empty list."""
    assert json_schema_errors({"name": "x", "tags": ["t"], "score": 0.5, "kind": "a"}, SCHEMA) == []


def test_each_keyword_names_the_path() -> None:
    """Each violation names where it is."""
    errs = json_schema_errors(
        {"name": "", "tags": ["t", 3, "u"], "score": 2, "kind": "c", "x": 1}, SCHEMA
    )
    assert "$: unexpected properties ['x']" in errs
    assert "$.name: shorter than minLength=1" in errs
    assert "$.tags[1]: expected string, got int" in errs
    assert "$.tags: 3 items, more than maxItems=2" in errs
    assert "$.score: 2 is above maximum=1" in errs
    assert "$.kind: 'c' is not one of ['a', 'b']" in errs
    assert json_schema_errors({}, SCHEMA)[:1] == ["$: missing required property 'name'"]
    assert json_schema_errors(True, {"type": "integer"}) == ["$: expected integer, got bool"]


def test_check_strips_a_code_fence() -> None:
    """```json fences around the reply are ignored before parsing."""
    check = make_check({"type": "array"})
    assert check is not None and check("```json\n[1, 2]\n```") == [1, 2]
    with pytest.raises(ValueError, match="not JSON"):
        check("[1, 2")


def test_bad_schema_arguments_are_refused() -> None:
    """An empty schema or a non-callable is a ConfigError."""
    with pytest.raises(ConfigError, match="checks nothing"):
        make_check({})
    with pytest.raises(ConfigError, match="JSON Schema dict, a pydantic model"):
        make_check(42)
