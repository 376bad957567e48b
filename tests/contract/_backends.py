"""Storage URLs for the contract suites: one per backend, isolated and cleaned up."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from surefoot import storage

BACKENDS = ["memory", "sqlite", "postgresql", "redis"]


def backend_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest, name: str) -> str:
    """A fresh URL on backend ``kind``; PostgreSQL and Redis get a scratch schema/prefix."""
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / f'{name}-{uuid.uuid4().hex[:8]}.db'}"
    if kind == "postgresql":
        return _scratch(str(request.getfixturevalue("pg_url")), "schema", request)
    return _scratch(str(request.getfixturevalue("redis_url")), "prefix", request)


def _scratch(base: str, option: str, request: pytest.FixtureRequest) -> str:
    """A PostgreSQL schema or Redis key prefix of this test only, dropped afterwards."""
    url = f"{base}?{option}=sf_t_{uuid.uuid4().hex[:12]}"

    def drop() -> None:
        st: Any = storage.open(url)
        if option == "schema":
            st.db.drop_schema()
        else:
            st.db.delete_prefix()
        st.close()

    request.addfinalizer(drop)
    return url
