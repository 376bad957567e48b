"""Lab experiments for surefoot.statebus (registered on import)."""

from __future__ import annotations
