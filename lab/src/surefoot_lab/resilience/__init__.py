"""Lab experiments for surefoot.resilience (seed 001), registered on import.

Each experiment answers one exercise's "Done when" with measured tables, using only the
public API. Every count is taken inside the fakes (FakeLLM, ``faults.wrap``, the fake
payment and tool services), never in the client. The model is the seeded FakeLLM.
The modules are imported in the course's order: ``waits`` (Easy: classify, waits, odds),
``timeouts`` (Medium: FakeLLM retries, per-attempt timeouts, idempotency across processes),
``outages`` (Hard: a resilient client in an outage, keyed payments, crash and resume). That
is the order ``surefoot lab list`` shows, so the imports below must not be sorted.
"""

from __future__ import annotations

# isort: off
from . import waits  # noqa: F401 - registers the experiments
from . import timeouts  # noqa: F401
from . import outages  # noqa: F401
# isort: on

__all__: list[str] = []
