"""A Redis that lost part of a namespace (a restart without persistence, a FLUSH of some
keys) is reported as surefoot's error naming what to do, not as redis-py's raw
``ResponseError`` from inside a Lua script (seen after a restart lost the meta hash while
workers kept writing the log)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _backends import backend_url

from surefoot import storage
from surefoot.errors import StoreError
from surefoot.statebus import Store


def test_a_namespace_whose_marks_were_lost_is_refused_clearly(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = backend_url("redis", tmp_path, request, "marks")
    st = Store(url, namespace="team")
    for i in range(3):
        st.write(f"k{i}", i)
    st.close()
    raw = storage.open(url)
    try:
        state = raw.statestore("team")
        raw.db.call(lambda c: c.delete(state._meta), write=True)  # the marks, lost
    finally:
        raw.close()
    with pytest.raises(StoreError) as info:
        Store(url, namespace="team")
    text = str(info.value)
    assert "'team'" in text and "lost" in text and "ResponseError" not in type(info.value).__name__
    assert "password" not in text
