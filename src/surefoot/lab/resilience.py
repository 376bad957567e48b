"""Lab experiments for surefoot.resilience (registered on import)."""

from __future__ import annotations
