"""Fixtures: an in-memory OpenTelemetry span exporter wired to surefoot, counters reset."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from surefoot import telemetry


@pytest.fixture
def spans() -> Iterator[Any]:
    """surefoot instrumented with a fresh TracerProvider writing to an in-memory exporter."""
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    exporter = memory.InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    telemetry.instrument(provider)
    try:
        yield exporter
    finally:
        telemetry.uninstrument()
        provider.shutdown()


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    telemetry.REGISTRY.reset()
    yield
    telemetry.REGISTRY.reset()
