"""Options kept in surefoot's own journal are refused on an engine URL, not ignored."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio")

from surefoot import durable
from surefoot.errors import ConfigError


@pytest.mark.parametrize(
    "options",
    [{"queue": "q"}, {"priority": 3}, {"dedup_id": "d-1"}],
)
def test_enqueue_on_temporal_refuses_journal_options(options: dict[str, object]) -> None:
    """enqueue(queue=/priority=/dedup_id=) on temporal:// names the option (a run's
    timeout= maps to Temporal: tests/conformance/test_composition_behaviour.py)."""
    app = durable.App("temporal://127.0.0.1:1?task_queue=t")

    @app.workflow(version="1")
    async def wf() -> str:
        return "x"

    with pytest.raises(ConfigError, match=next(iter(options))):
        app.enqueue(wf, run_id="r-1", **options)  # type: ignore[arg-type]
