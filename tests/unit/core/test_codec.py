"""The JSON codec: round trips, clear errors, never code execution."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from surefoot import codec
from surefoot.errors import ConflictError, ConflictKind, EncodeError, RecordedError


@codec.register
@dataclass(frozen=True)
class Finding:
    source: str
    score: float


@dataclass
class Unregistered:
    x: int


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda kids: st.lists(kids) | st.dictionaries(st.text().filter(lambda k: k != "$sf"), kids),
    max_leaves=20,
)


@given(json_values)
def test_plain_json_round_trips(value: object) -> None:
    """Any plain JSON value decodes to itself."""
    assert codec.loads(codec.dumps(value)) == value


def test_tagged_types_round_trip() -> None:
    """Datetimes, bytes, sets, tuples, decimals, uuids and registered dataclasses come back."""
    value = {
        "when": dt.datetime(2026, 11, 30, 14, 0, tzinfo=dt.UTC),
        "day": dt.date(2026, 1, 2),
        "blob": b"\x00\xff",
        "tags": {"a", "b"},
        "pair": (1, (2, 3)),
        "price": Decimal("0.10"),
        "id": uuid.UUID(int=7),
        "finding": Finding("web", 0.5),
        "span": dt.timedelta(seconds=90),
    }
    assert codec.loads(codec.dumps(value)) == value


def test_unregistered_dataclass_decodes_to_its_fields() -> None:
    """Decoding never imports a class named by the data; unknown classes become dicts."""
    assert codec.loads(codec.dumps(Unregistered(3))) == {"x": 3}


def test_unencodable_value_names_type_and_path() -> None:
    """A lock inside a list fails with its type and where it was, before anything is written."""
    import threading

    with pytest.raises(EncodeError) as info:
        codec.dumps({"items": [1, threading.Lock()]}, where="step 'plan'")
    err = info.value
    assert "lock" in err.type_name.lower()
    assert err.path == "$.items[1]"
    assert "step 'plan'" in str(err)


def test_nan_is_refused() -> None:
    """NaN is not JSON; it is refused rather than written as a non-standard token."""
    with pytest.raises(EncodeError, match="NaN"):
        codec.dumps([float("nan")])


def test_surefoot_errors_round_trip_with_attributes() -> None:
    """Errors written to a journal come back as themselves, facts included."""
    err = ConflictError("report", 2, 3, ["a"], "agent-1")
    back = codec.loads(codec.dumps(codec.error_to_data(err)))
    assert isinstance(back, ConflictError)
    assert (back.key, back.expected, back.version, back.author) == ("report", 2, 3, "agent-1")
    assert str(back) == str(err)


@pytest.mark.parametrize("kind", ["version", "fence", "stream", "transaction"])
def test_a_conflicts_kind_survives_the_journal(kind: ConflictKind) -> None:
    """A ConflictError read back from the journal keeps its kind and its message."""
    err = ConflictError("lease", 2, 3, None, "agent-1", kind=kind)
    back = codec.loads(codec.dumps(codec.error_to_data(err)))
    assert isinstance(back, ConflictError)
    assert back.kind == kind and str(back) == str(err)


def test_builtin_error_round_trips_and_foreign_errors_become_recorded() -> None:
    """Builtins are rebuilt; unknown types become RecordedError, never imported."""
    back = codec.loads(codec.dumps(codec.error_to_data(ValueError("bad"))))
    assert type(back) is ValueError and str(back) == "bad"

    class Custom(Exception):
        pass

    rec = codec.loads(codec.dumps(codec.error_to_data(Custom("boom"))))
    assert isinstance(rec, RecordedError)
    assert rec.type_name.endswith("Custom") and rec.message == "boom"


def test_codec_never_uses_pickle() -> None:
    """The codec module does not import pickle (a store must never execute code when read)."""
    import sys

    import surefoot.codec

    assert "pickle" not in surefoot.codec.__dict__
    assert not any(name == "pickle" for name in vars(sys.modules["surefoot.codec"]))
