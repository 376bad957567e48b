"""Reading by annotation: a value comes back as exactly the type the code declared."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import sys
import uuid
from decimal import Decimal
from typing import Annotated, Any, Literal, NamedTuple, NewType, Optional, TypeVar, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from surefoot import codec
from surefoot.errors import DecodeError, UnsupportedTypeError


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Pair(NamedTuple):
    left: int
    right: tuple[str, dt.date]


@dataclasses.dataclass(frozen=True)
class Finding:
    text: str
    found: dt.datetime
    tags: frozenset[str]
    pair: Pair | None = None
    color: Color = Color.RED
    score: float = 0.0


@dataclasses.dataclass
class Node:
    label: str
    children: list[Node] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Cat:
    name: str


@dataclasses.dataclass
class Dog:
    name: str


UserId = NewType("UserId", int)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(
            same(k, next(j for j in b if j == k)) and same(a[k], b[k]) for k in a
        )
    if isinstance(a, set | frozenset):
        return a == b and all(any(same(x, y) for y in b) for x in a)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return bool(a == b)


# -- generated (annotation, values) pairs ---------------------------------------------------

floats = st.floats(allow_nan=False, allow_infinity=False)
texts = st.text(max_size=8).filter(lambda s: s != "$sf")
dates = st.dates(min_value=dt.date(1, 1, 2))
finding = st.builds(
    Finding,
    text=texts,
    found=st.datetimes(timezones=st.none() | st.just(dt.UTC)),
    tags=st.frozensets(texts, max_size=3),
    pair=st.none() | st.builds(Pair, st.integers(), st.tuples(texts, dates)),
    color=st.sampled_from(Color),
    score=floats,
)
node = st.recursive(
    st.builds(Node, texts, st.just([])),
    lambda kids: st.builds(Node, texts, st.lists(kids, max_size=3)),
    max_leaves=6,
)
BASE: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (int, st.integers()),
    (float, floats),
    (str, texts),
    (bool, st.booleans()),
    (type(None), st.none()),
    (bytes, st.binary(max_size=16)),
    (dt.datetime, st.datetimes(timezones=st.none() | st.just(dt.UTC))),
    (dt.date, dates),
    (dt.time, st.times()),
    (dt.timedelta, st.timedeltas(dt.timedelta(days=-9999), dt.timedelta(days=9999))),
    (Decimal, st.decimals(allow_nan=False, allow_infinity=False)),
    (uuid.UUID, st.uuids()),
    (Color, st.sampled_from(Color)),
    (Level, st.sampled_from(Level)),
    (Literal["a", 3, True], st.sampled_from(["a", 3, True])),
    (Pair, st.builds(Pair, st.integers(), st.tuples(texts, dates))),
    (Finding, finding),
    (Node, node),
    (UserId, st.integers().map(UserId)),
    (Any, st.integers() | texts | st.none()),
]
HASHABLE: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (int, st.integers()),
    (str, texts),
    (dt.date, dates),
    (Color, st.sampled_from(Color)),
]


@st.composite
def annotated(draw: st.DrawFn, depth: int = 0) -> tuple[Any, st.SearchStrategy[Any]]:
    """An annotation and a strategy for values of it."""
    kinds = ["base"] * 3 + (
        ["list", "tuple", "pair", "set", "dict", "intdict", "opt"] if depth < 2 else []
    )
    kind = draw(st.sampled_from(kinds))
    if kind == "base":
        return draw(st.sampled_from(BASE))
    if kind == "set":
        ann, values = draw(st.sampled_from(HASHABLE))
        container = draw(st.sampled_from([set, frozenset]))
        return container[ann], st.builds(container, st.lists(values, max_size=4))  # type: ignore[index]
    ann, values = draw(annotated(depth + 1))
    if kind == "list":
        return list[ann], st.lists(values, max_size=3)  # type: ignore[valid-type]
    if kind == "tuple":
        return tuple[ann, ...], st.lists(values, max_size=3).map(tuple)  # type: ignore[valid-type]
    if kind == "pair":
        ann2, values2 = draw(annotated(depth + 1))
        return tuple[ann, ann2], st.tuples(values, values2)  # type: ignore[valid-type]
    if kind == "dict":
        return dict[str, ann], st.dictionaries(texts, values, max_size=3)  # type: ignore[valid-type]
    if kind == "intdict":
        return dict[int, ann], st.dictionaries(st.integers(), values, max_size=3)  # type: ignore[valid-type]
    return Optional[ann], st.none() | values  # noqa: UP045


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_encode_then_decode_as_gives_the_same_value_of_the_same_type(data: st.DataObject) -> None:
    """For generated values of supported annotations, both reading paths give an identical value."""
    ann, values = data.draw(annotated())
    value = data.draw(values)
    codec.check_annotation(ann)
    text = codec.dumps(value)
    from_text = codec.loads_as(text, ann)
    from_loads = codec.decode_as(codec.loads(text), ann)
    if ann is Any:
        assert from_text == value
        return
    assert same(from_text, value), (ann, value, from_text)
    assert same(from_loads, value), (ann, value, from_loads)


def test_an_unregistered_dataclass_comes_back_as_itself_not_a_dict() -> None:
    """What a step returned (a Finding) is what a resumed run reads, though never registered."""
    f = Finding(
        "sky is blue",
        dt.datetime(2026, 12, 1, 12),
        frozenset({"a"}),
        Pair(1, ("x", dt.date(2026, 1, 1))),
    )
    stored = codec.dumps(f)
    assert isinstance(codec.loads(stored), dict)  # the old path: another type after a crash
    back = codec.decode_as(codec.loads(stored), Finding)
    assert back == f and type(back.pair) is Pair and type(back.pair.right) is tuple
    assert codec.loads_as(stored, Finding) == f


def test_pydantic_models_are_rebuilt_by_annotation() -> None:
    """A pydantic model (never registered) comes back as the model, nested ones too."""
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        name: str
        when: dt.date

    class Basket(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        items: list[Item]

    b = Basket(items=[Item(name="x", when=dt.date(2026, 1, 2))])
    back = codec.loads_as(codec.dumps([b]), list[Basket])
    assert back == [b] and type(back[0].items[0]) is Item


def test_a_union_of_lookalike_classes_is_told_apart_by_the_stored_name() -> None:
    """Cat | Dog with the same fields: the tag's class name (only compared) picks the member."""
    assert type(codec.loads_as(codec.dumps(Dog("rex")), Cat | Dog)) is Dog
    assert type(codec.loads_as(codec.dumps(Cat("tom")), Cat | Dog)) is Cat
    assert codec.loads_as(codec.dumps([1, 2.5, "x"]), list[int | float | str]) == [1, 2.5, "x"]
    assert type(codec.loads_as(codec.dumps(1), float | int)) is int
    assert type(codec.loads_as(codec.dumps((1,)), list[int] | tuple[int, ...])) is tuple


def test_no_class_named_by_the_data_is_imported() -> None:
    """A tag naming a module is only ever compared: the annotation picks the class."""
    assert "surefoot_evil_mod" not in sys.modules
    raw = json.dumps({"$sf": "obj", "t": "surefoot_evil_mod.Boom", "v": {"name": "x"}})
    assert codec.loads_as(raw, Cat) == Cat("x")
    assert codec.loads_as(raw, Any) == {"name": "x"}
    assert "surefoot_evil_mod" not in sys.modules


T = TypeVar("T")


class Plain:
    def __init__(self, x: int) -> None:
        self.x = x


@pytest.mark.parametrize(
    ("annotation", "match"),
    [
        (Plain, "no known way to build one"),
        (list[Plain], "Plain"),
        (dict[dt.date, int], "a date key cannot be rebuilt"),
        ("Finding", "evaluate it first"),
        (T, "type variable"),
        (Literal[1.5j], "Literal value"),  # type: ignore[valid-type]
        (Union[int, Plain], "Plain"),  # noqa: UP007
    ],
)
def test_annotations_that_cannot_be_rebuilt_are_refused_up_front(
    annotation: Any, match: str
) -> None:
    """check_annotation (and decode_as) refuse them with a clear error naming where."""
    with pytest.raises(UnsupportedTypeError, match=match) as info:
        codec.check_annotation(annotation, where="step fetch")
    assert info.value.where == "step fetch" and "step fetch" in str(info.value)
    with pytest.raises(UnsupportedTypeError):
        codec.decode_as(1, annotation)


def test_supported_annotations_pass_the_check() -> None:
    """Recursive dataclasses, Annotated, NewType, Any and bare containers are accepted."""
    for ann in (
        Node,
        Annotated[Finding, "meta"],
        UserId,
        Any,
        dict,
        list,
        tuple[()],
        dict[Level, int],
    ):
        codec.check_annotation(ann)


@pytest.mark.parametrize(
    ("data", "annotation", "path"),
    [
        ({"name": 1}, Cat, "$.name"),
        ({"name": "x", "age": 3}, Cat, "$"),
        ({}, Cat, "$"),
        ([1, "x"], list[int], "$[1]"),
        ([1, 2, 3], tuple[int, int], "$"),
        ("c", Literal["a", "b"], "$"),
        ("green", Color, "$"),
        (True, int, "$"),
        (1.5, int, "$"),
        ({"x": 1}, dict[int, int], "$['x']"),
        ("soon", dt.datetime, "$"),
        ({"$sf": "datetime", "v": "garbage"}, dt.datetime, "$"),
        ({"$sf": "set", "v": 3}, set[int], "$"),
        ([1], Optional[Cat], "$"),  # noqa: UP045
    ],
)
def test_data_that_does_not_fit_is_a_decode_error_not_another_type(
    data: Any, annotation: Any, path: str
) -> None:
    """Mismatched data raises DecodeError naming the path, never returns a different type."""
    with pytest.raises(DecodeError) as info:
        codec.decode_as(data, annotation, where="step fetch")
    assert info.value.path == path and info.value.where == "step fetch"


def test_return_annotation_resolves_strings_and_checks() -> None:
    """return_annotation reads a function's (string) return annotation; Any when absent."""

    async def step() -> list[Finding]:
        return []

    def bad() -> Plain:
        return Plain(1)

    assert codec.return_annotation(step) == list[Finding]
    assert codec.return_annotation(lambda: 1) is Any
    with pytest.raises(UnsupportedTypeError, match="bad"):
        codec.return_annotation(bad)


def test_plain_enums_can_be_stored_and_registered() -> None:
    """A plain Enum encodes (it used to be refused) and decodes to its value, or to itself."""
    assert codec.loads(codec.dumps(Color.RED)) == "red"
    assert codec.loads_as(codec.dumps(Color.BLUE), Color) is Color.BLUE
