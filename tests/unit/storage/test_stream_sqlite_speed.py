"""SQLite stream appends stay cheap: statements per commit, counted with the driver's trace
callback; never timed."""

from __future__ import annotations

from pathlib import Path

from surefoot.statebus import Stream


def _statements(st: Stream, fn: object) -> list[str]:
    conn = st.storage.db.conn()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        fn()  # type: ignore[operator]
    finally:
        conn.set_trace_callback(None)
    return [" ".join(s.split())[:40] for s in seen]


def test_an_append_is_one_statement_in_its_own_transaction(tmp_path: Path) -> None:
    """The INSERT alone (dedup and expect_last_seq folded in; no BEGIN, no COMMIT sent); a
    retry, which appends nothing, then finds the original in one transaction."""
    st = Stream(f"sqlite:///{tmp_path / 's.db'}", "s")
    st.append(0, message_id="warm")
    db = st.storage.db
    commits = db.commits
    fresh = _statements(st, lambda: st.append(1, message_id="a"))
    assert len(fresh) == 1 and fresh[0].startswith("INSERT INTO sf_stream"), fresh
    guarded = _statements(st, lambda: st.append(2, message_id="b", expect_last_seq=2))
    assert len(guarded) == 1, guarded
    assert db.commits == commits + 2
    retry = _statements(st, lambda: st.append(1, message_id="a"))
    # the INSERT (nothing appended), then BEGIN IMMEDIATE, the INSERT, the read, COMMIT
    assert len(retry) == 5 and retry[1] == "BEGIN IMMEDIATE", retry
    assert st.append(1, message_id="a").duplicate and st.stats().messages == 3
    st.close()


def test_a_bounded_append_trims_in_at_most_seven_statements(tmp_path: Path) -> None:
    """At its limit each append trims the oldest message in the same commit: forget old ids,
    insert, read the head and the consumers' floor, delete (returning), remember the id."""
    st = Stream(f"sqlite:///{tmp_path / 's.db'}", "s", max_messages=3)
    for i in range(5):
        st.append(i, message_id=f"m{i}")
    under = _statements(st, lambda: st.append(5, message_id="m5"))
    assert len(under) <= 7, under
    assert st.stats().messages == 3 and st.stats().first_seq == 4
    assert st.append(0, message_id="m0").duplicate  # trimmed, still in its dedup window
    st.close()
