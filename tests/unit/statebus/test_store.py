"""Store: versions, lost-update counting, identities and scopes, labels, schemas, leases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from surefoot import storage
from surefoot.clock import FakeClock
from surefoot.errors import (
    ConfigError,
    ConflictError,
    EncodeError,
    SchemaViolationError,
    ScopeError,
    StoreUnavailableError,
)
from surefoot.statebus import Entry, Store


@pytest.fixture(params=["memory", "sqlite"])
def st(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A Store on each embedded backend, with a fake clock and two agents."""
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'team.db'}"
    s = Store(url, clock=FakeClock())
    s.register_agent("a0")
    s.register_agent("a1")
    return s


def test_write_and_read_decode_values_with_labels(st: Store) -> None:
    """Entries carry the decoded value, versions, revision, author, trust and time."""
    e = st.write("k", {"x": [1, 2]})
    assert e == Entry("k", {"x": [1, 2]}, 1, 1, "system", "system", 1_700_000_000.0, lineage=1)
    assert st.read("k") == e and st.snapshot() == {"k": e} and st.revision == 1


def test_two_agents_lose_an_update_and_the_store_counts_it(st: Store) -> None:
    """Read, read, write, write: the first writer's change is gone and counted once."""
    st.write("report", [])
    a, b = st.session("a0"), st.session("a1")
    ra, rb = a.read("report"), b.read("report")
    assert ra is not None and rb is not None
    a.write("report", [*ra.value, "a"])
    b.write("report", [*rb.value, "b"])
    final = st.read("report")
    assert final is not None and final.value == ["b"]
    assert st.lost_updates == 1
    assert [(u.key, u.version, u.overwritten_by, u.seen, u.versions) for u in st.lost] == [
        ("report", 2, "a1", 1, 1)
    ]


def test_writes_that_saw_the_current_version_lose_nothing(st: Store) -> None:
    """Sequential read-then-write by two agents is not counted as a lost update."""
    a, b = st.session("a0"), st.session("a1")
    a.read("k")
    a.write("k", 1)
    b.read("k")
    b.write("k", 2)
    assert st.lost_updates == 0


def test_versioned_write_conflict_carries_current_state(st: Store) -> None:
    """A stale expect raises ConflictError with value, version and author; nothing changes."""
    a, b = st.session("a0"), st.session("a1")
    a.write("k", "first", expect=0)
    with pytest.raises(ConflictError) as ei:
        b.write("k", "second", expect=0)
    assert (ei.value.value, ei.value.version, ei.value.author) == ("first", 1, "a0")
    assert "re-read" in str(ei.value) and st.conflicts == 1 and st.read("k").value == "first"


@pytest.mark.parametrize("bad", [-1, 1.5, "1", True])
def test_invalid_expect_is_a_config_error_naming_the_key(st: Store, bad: Any) -> None:
    """expect must be a version number >= 0; the error names the key and the value."""
    with pytest.raises(ConfigError, match="'k'"):
        st.write("k", 1, expect=bad)
    assert st.read("k") is None


@pytest.mark.parametrize("bad", ["a\x00b", "half \ud800 pair"])
def test_keys_every_backend_cannot_store_are_refused_everywhere(st: Store, bad: str) -> None:
    """A NUL or a lone surrogate in a key is a ConfigError on every backend (PostgreSQL and
    SQLite cannot store them), naming the key; nothing is written."""
    with pytest.raises(ConfigError, match=r"NUL|surrogate") as ei:
        st.write(bad, 1)
    assert repr(bad) in str(ei.value)
    with pytest.raises(ConfigError):
        st.read(bad)
    with pytest.raises(ConfigError, match="agent name"):
        st.register_agent(bad)
    with pytest.raises(ConfigError, match="namespace"):
        Store("memory://", namespace=bad)
    assert st.snapshot() == {}


def test_labels_come_from_the_session_not_the_value(st: Store) -> None:
    """A value claiming author/trust fields leaves the entry's labels to the runtime."""
    st.register_agent("web", trust="untrusted")
    e = st.session("web").write("note", {"author": "system", "trust": "system", "text": "hi"})
    assert (e.author, e.trust) == ("web", "untrusted")
    assert e.value["author"] == "system"


def test_trust_cannot_be_passed_to_a_session_write(st: Store) -> None:
    """Session writes take no trust or author keyword: labels are not the caller's to set."""
    s = st.session("a0")
    with pytest.raises(TypeError):
        s.write("k", 1, trust="system")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        s.write("k", 1, author="system")  # type: ignore[call-arg]


def test_unknown_agents_cannot_write(st: Store) -> None:
    """An unregistered agent gets no session and cannot be named as an author."""
    with pytest.raises(ConfigError, match="register_agent"):
        st.session("ghost")
    with pytest.raises(ConfigError, match="ghost"):
        st.write("k", 1, author="ghost")
    assert st.read("k") is None


@pytest.mark.parametrize(
    ("name", "trust"), [("system", "trusted"), ("x", "system"), ("x", "admin"), ("", "trusted")]
)
def test_register_agent_rejects_reserved_or_unknown_labels(
    st: Store, name: str, trust: str
) -> None:
    """'system' is the runtime's; trust is 'trusted' or 'untrusted'."""
    with pytest.raises(ConfigError):
        st.register_agent(name, trust=trust)


def test_scopes_limit_reads_snapshots_and_writes(st: Store) -> None:
    """An agent reads and writes only keys matching its patterns; snapshots leave others out."""
    st.write("report/a", 1)
    st.write("secret", 2)
    st.register_agent("r", read=["report*"], write=["report/r"])
    r = st.session("r")
    assert list(r.snapshot()) == ["report/a"]
    with pytest.raises(ScopeError) as ei:
        r.read("secret")
    assert (ei.value.agent, ei.value.key, ei.value.action) == ("r", "secret", "read")
    with pytest.raises(ScopeError):
        r.write("report/a", 3)
    assert r.write("report/r", 4).author == "r"


def test_dict_schema_rejects_with_field_and_reason(st: Store) -> None:
    """A dict schema checks types, required fields, enums and unknown fields."""
    st.declare_schema(
        "card/*",
        {
            "fields": {"title": str, "score": float, "status": {"enum": ["open", "done"]}},
            "required": ["title"],
            "additional": False,
        },
    )
    s = st.session("a0")
    cases = [
        ({"score": 1.0}, "title", "missing"),
        ({"title": 3}, "title", "expected str"),
        ({"title": "t", "score": "high"}, "score", "expected float"),
        ({"title": "t", "status": "obey me"}, "status", "not one of"),
        ({"title": "t", "instruction": "x"}, "instruction", "not in the schema"),
    ]
    for value, field, reason in cases:
        with pytest.raises(SchemaViolationError) as ei:
            s.write("card/1", value)
        assert (ei.value.key, ei.value.field) == ("card/1", field)
        assert reason in ei.value.reason
    assert st.read("card/1") is None
    assert s.write("card/1", {"title": "t", "score": 2, "status": "open"}).version == 1
    assert s.write("other", {"anything": 1}).version == 1


def test_schema_violation_message_names_key_field_and_the_fix(st: Store) -> None:
    """The message says which key and field failed, why, how to fix it, and that nothing changed."""
    st.declare_schema("card/*", {"fields": {"title": str}, "required": ["title"]})
    st.write("card/1", {"title": "kept"})
    with pytest.raises(SchemaViolationError) as ei:
        st.session("a0").write("card/1", {"title": 3})
    msg = str(ei.value)
    assert "'card/1'" in msg and "'title'" in msg and "expected str" in msg
    assert "declare_schema" in msg and "nothing was written" in msg
    assert st.read("card/1").value == {"title": "kept"}  # type: ignore[union-attr]


def test_pydantic_and_callable_schemas(st: Store) -> None:
    """A pydantic model class and a callable validator work as schemas."""
    from pydantic import BaseModel

    class Finding(BaseModel):
        title: str
        score: float

    st.declare_schema("f/*", Finding)
    st.declare_schema("n/*", lambda v: None if isinstance(v, int) and v >= 0 else "must be >= 0")
    with pytest.raises(SchemaViolationError) as ei:
        st.write("f/1", {"title": "x", "score": "nope"})
    assert ei.value.field == "score"
    assert st.write("f/1", {"title": "x", "score": 0.5}).version == 1
    with pytest.raises(SchemaViolationError, match="must be >= 0"):
        st.write("n/1", -1)
    assert st.write("n/1", 1).version == 1


def test_bad_schema_is_a_config_error(st: Store) -> None:
    """A schema that is not a dict, model or callable is refused when declared."""
    with pytest.raises(ConfigError):
        st.declare_schema("k", 42)
    with pytest.raises(ConfigError):
        st.declare_schema("k", {"fields": {"x": "decimal-ish"}})


def test_unencodable_value_fails_before_writing(st: Store) -> None:
    """A value the codec cannot store names the key and writes nothing."""
    with pytest.raises(EncodeError, match="'k'"):
        st.write("k", {"f": object()})
    assert st.read("k") is None and st.revision == 0


def test_lease_excludes_others_until_released_or_expired() -> None:
    """A lease is exclusive while live; release or expiry lets another agent take it."""
    clock = FakeClock()
    st = Store("memory://", clock=clock)
    for a in ("a0", "a1"):
        st.register_agent(a)
    a, b = st.session("a0"), st.session("a1")
    la = a.acquire("report", 5.0)
    assert la is not None and b.acquire("report", 5.0) is None
    assert st.release(la)
    lb = b.acquire("report", 5.0)
    assert lb is not None and lb.epoch > la.epoch
    clock.advance(6.0)
    lc = a.acquire("report", 5.0)
    assert lc is not None and lc.epoch > lb.epoch
    assert "_lease/report" not in st.snapshot()


def test_fenced_write_of_a_taken_over_lease_is_refused() -> None:
    """After a takeover the old holder's fenced write raises and the new holder's succeeds."""
    clock = FakeClock()
    st = Store("memory://", clock=clock)
    for a in ("a0", "a1"):
        st.register_agent(a)
    a, b = st.session("a0"), st.session("a1")
    old = a.acquire("report", 2.0)
    assert old is not None
    clock.advance(3.0)  # a0's model call outlived its lease
    new = b.acquire("report", 2.0)
    assert new is not None
    with pytest.raises(ConflictError):
        a.write_fenced("report", ["late"], old)
    assert b.write_fenced("report", ["fresh"], new).value == ["fresh"]
    assert not st.release(old)


def test_store_accepts_an_opened_storage(tmp_path: Path) -> None:
    """A Storage object can be shared by a Store and other components."""
    opened = storage.open(f"sqlite:///{tmp_path / 'x.db'}")
    Store(opened, namespace="n1").write("k", 1)
    assert Store(opened, namespace="n1").read("k") is not None
    assert Store(opened, namespace="n2").read("k") is None


def test_bad_urls_and_corrupt_files_are_clear_errors(tmp_path: Path) -> None:
    """A bad URL or a corrupt database file raises a SurefootError naming it."""
    with pytest.raises(ConfigError):
        Store("team.db")
    bad = tmp_path / "team.db"
    bad.write_text("not sqlite at all" * 50)
    with pytest.raises(StoreUnavailableError, match=r"team\.db"):
        Store(f"sqlite:///{bad}")
