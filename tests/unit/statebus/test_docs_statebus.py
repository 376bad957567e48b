"""The first example of docs/statebus.md runs as printed and shows what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "statebus.md"


def test_store_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Store example writes, versions, and catches the stale write's ConflictError."""
    block = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(DOC), "exec"), {"__name__": "docs_statebus"})
    assert capsys.readouterr().out.strip() == "2 critic ['finding', 'critique']"


def test_trust_examples_run_and_show_what_their_comments_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trust section's blocks, run in order: the relay keeps the taint, the endorsement is
    recorded with who endorsed what."""
    section = DOC.read_text().split("## Trust and injection", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(tmp_path)
    ns: dict[str, object] = {"__name__": "docs_statebus_trust"}
    from surefoot.guard import label_of
    from surefoot.statebus import Store

    assert len(blocks) == 3
    for i, block in enumerate(blocks):
        exec(compile(block, str(DOC), "exec"), ns)
        if i == 1:  # the relay's plain write
            relay = ns["st"].read("plan/summary")  # type: ignore[attr-defined]
            assert label_of(relay).tainted == {"web-reader"}

    st = ns["st"]
    assert isinstance(st, Store)
    relayed = st.read("plan/summary")
    assert relayed is not None and relayed.version == 2  # the endorsed write came second
    assert label_of(relayed).tainted == frozenset() and label_of(relayed).trust == "endorsed"
    (rec,) = st.endorsements()
    assert (rec.principal, rec.writer, rec.key, rec.version) == (
        "human:alice",
        "summariser",
        "plan/summary",
        2,
    )
    assert rec.sources == ("web-reader",) and rec.reason == "checked the page"


def test_session_watch_and_txn_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The sessions example skips the out-of-scope key, is tainted by the watched note and
    stores its transaction's value tainted."""
    section = DOC.read_text().split("**Sessions watch and transact in their scopes.**", 1)[1]
    block = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    exec(compile(block, str(DOC), "exec"), {"__name__": "docs_statebus_sessions"})
    assert capsys.readouterr().out.splitlines() == [
        "['notes/page']",
        "True",
        "frozenset({'web'})",
    ]
