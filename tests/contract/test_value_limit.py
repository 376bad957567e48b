"""Every backend refuses a value over ``max_value_bytes`` (default 1 MiB) the same way.

Keys of a StateStore, stream messages and the journal's step results, run arguments and
signal payloads: each is refused with ``ValueTooLargeError`` naming it, its size, the limit
and the URL option that raises it, and nothing is written.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, backend_url

from surefoot import storage
from surefoot.errors import ConfigError, ValueTooLargeError
from surefoot.statebus import Store
from surefoot.storage.checks import DEFAULT_MAX_VALUE_BYTES
from surefoot.storage.runs import RunRow, StepWrite

TEN_MB = '"' + "x" * 10_000_000 + '"'


def _with(url: str, option: str) -> str:
    return url + ("&" if "?" in url else "?") + option


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each backend."""
    return str(request.param)


def _open(kind: str, tmp_path: Path, request: pytest.FixtureRequest, option: str = "") -> Any:
    url = backend_url(kind, tmp_path, request, "limit")
    st = storage.open(_with(url, option) if option else url)
    request.addfinalizer(st.close)
    return st


def test_a_ten_megabyte_value_is_refused_by_default(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """10 MB to a key or a stream is refused at the 1 MiB default; nothing is written."""
    st = _open(kind, tmp_path, request)
    state = st.statestore(f"n-{uuid.uuid4().hex[:8]}")
    with pytest.raises(ValueTooLargeError) as ei:
        state.write("report", TEN_MB, author="a", trust="trusted", expect=None, now=1.0)
    e = ei.value
    assert e.size == 10_000_002 and e.limit == DEFAULT_MAX_VALUE_BYTES == 1_048_576
    assert "'report'" in e.what and "max_value_bytes" in str(e) and "10,000,002" in str(e)
    assert isinstance(e, ValueError)
    assert state.read("report") is None and state.revision() == 0
    log = st.stream(f"s-{uuid.uuid4().hex[:8]}")
    with pytest.raises(ValueTooLargeError) as si:
        log.append("m1", TEN_MB, now=1.0)
    assert "'m1'" in si.value.what and log.last_seq() == 0


def test_the_limit_is_exact_and_set_in_the_url(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """?max_value_bytes=100 accepts 100 bytes of UTF-8 JSON and refuses 101 (é counts 2)."""
    st = _open(kind, tmp_path, request, "max_value_bytes=100")
    state = st.statestore(f"n-{uuid.uuid4().hex[:8]}")
    fits = '"' + "é" * 49 + '"'  # 2 + 98 bytes
    assert state.write("k", fits, author="a", trust="t", expect=None, now=1.0).version == 1
    with pytest.raises(ValueTooLargeError) as ei:
        state.write("k", fits[:-1] + 'x"', author="a", trust="t", expect=1, now=1.0)
    assert (ei.value.size, ei.value.limit) == (101, 100)
    assert state.read("k").value == fits
    log = st.stream(f"s-{uuid.uuid4().hex[:8]}")
    assert log.append("ok", fits, now=1.0).seq == 1
    with pytest.raises(ValueTooLargeError):
        log.append("big", fits + " ", now=1.0)
    assert log.last_seq() == 1


def test_zero_means_no_limit(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """?max_value_bytes=0 accepts a 2 MB value."""
    st = _open(kind, tmp_path, request, "max_value_bytes=0")
    state = st.statestore(f"n-{uuid.uuid4().hex[:8]}")
    big = '"' + "y" * 2_000_000 + '"'
    assert state.write("k", big, author="a", trust="t", expect=None, now=1.0).version == 1
    assert state.read("k").value == big


@pytest.mark.parametrize("bad", ["-1", "1MB", ""])
def test_a_bad_limit_is_a_config_error(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, bad: str
) -> None:
    """A negative or non-numeric max_value_bytes is refused, naming the value and the default."""
    url = _with(backend_url(kind, tmp_path, request, "limit"), f"max_value_bytes={bad}")
    with pytest.raises(ConfigError, match="max_value_bytes must be a whole number") as ei:
        storage.open(url)
    assert repr(bad) in str(ei.value) and "1 MiB" in str(ei.value)


def test_store_write_refuses_it_before_any_statement(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Through Store (and a session), the error reaches the caller and no version is made."""
    url = backend_url(kind, tmp_path, request, "limit")
    st = Store(_with(url, "max_value_bytes=1000"), f"n-{uuid.uuid4().hex[:8]}")
    request.addfinalizer(st.close)
    st.register_agent("a")
    with pytest.raises(ValueTooLargeError, match="key 'notes'"):
        st.session("a").write("notes", "z" * 2000)
    assert st.read("notes") is None and st.revision == 0 and st.writes == 0


def _run(run_id: str, args: str = "[[], {}]") -> RunRow:
    return RunRow(run_id, "wf", "1", "h", args, "journal_keys", "pending", 1.0, 1.0)


@pytest.mark.parametrize("journal_kind", ["sqlite", "postgresql"])
def test_the_journal_refuses_large_step_results_arguments_and_signals(
    journal_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A step result, run arguments or a signal payload over the limit is refused, unwritten."""
    journal = _open(journal_kind, tmp_path, request, "max_value_bytes=1000").journal()
    big = '"' + "r" * 2000 + '"'
    with pytest.raises(ValueTooLargeError, match="arguments of run 'r0'"):
        journal.create_run(_run("r0", big))
    assert journal.get_run("r0") is None
    journal.create_run(_run("r1"))
    step = StepWrite("r1", 0, "1", "fetch", "step", "done", big, None, 1, 1.0, 1.0)
    with pytest.raises(ValueTooLargeError, match=r"result of step 1 \('fetch'\) of run 'r1'"):
        journal.commit([step])
    assert journal.steps("r1") == []
    with pytest.raises(ValueTooLargeError, match="signal 'go'"):
        journal.signal("r1", "go", big, now=1.0, signal_id="s1")
    assert journal.pending_signal("r1", "go") is None
