"""Lab experiments for surefoot.durable (registered on import)."""

from __future__ import annotations
