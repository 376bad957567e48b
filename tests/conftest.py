"""Shared fixtures: service URLs that skip (or fail under SUREFOOT_REQUIRE_SERVICES=1)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from surefoot_lab.local_model import LabModel

# Under pytest-xdist (`make unit`), whole files go to a worker (tests/xdist_scheduling.py).
pytest_plugins = ["xdist_scheduling"]

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")

REQUIRE_SERVICES = os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1"
PG_URL = os.environ.get("SUREFOOT_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("SUREFOOT_REDIS_URL", "redis://127.0.0.1:6379/0")


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _service(name: str, url: str, host: str, port: int) -> str:
    if _port_open(host, port):
        return url
    reason = f"{name} is not reachable on {host}:{port}"
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason}, and SUREFOOT_REQUIRE_SERVICES=1 requires it")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_url() -> str:
    """URL of the local PostgreSQL (skips when absent, fails under REQUIRE_SERVICES)."""
    return _service("PostgreSQL", PG_URL, "127.0.0.1", 5432)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of the local Redis (skips when absent, fails under REQUIRE_SERVICES)."""
    return _service("Redis", REDIS_URL, "127.0.0.1", 6379)


@pytest.fixture(scope="session")
def temporal_bin() -> str:
    """Path of the `temporal` CLI, with temporalio importable (skips when surefoot[temporal]
    is absent, fails under REQUIRE_SERVICES)."""
    from surefoot.engines.temporal import find_temporal_binary

    try:
        import temporalio.client  # noqa: F401 - the SDK must be there too

        return find_temporal_binary()
    except ImportError as exc:  # MissingExtraError is an ImportError
        reason = f"surefoot[temporal] is not installed: {exc}"
        if REQUIRE_SERVICES:
            pytest.fail(f"{reason}, and SUREFOOT_REQUIRE_SERVICES=1 requires it")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def local_llm() -> Iterator[LabModel]:
    """The local SmolLM2 server, started once per session and stopped by pid (skips without
    `make local-llm`, fails under REQUIRE_SERVICES)."""
    from surefoot_lab.local_model import lab_model, local_model_missing

    reason = local_model_missing()
    if reason is not None:
        if REQUIRE_SERVICES:
            pytest.fail(f"{reason}, and SUREFOOT_REQUIRE_SERVICES=1 requires it")
        pytest.skip(reason)
    with lab_model("local") as model:
        assert model is not None
        yield model
