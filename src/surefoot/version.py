"""The version of surefoot, in a module that imports nothing.

``surefoot.__version__`` re-exports it; telemetry names it in its spans and metrics, and
takes it from here so that it does not import the package that imports it.
"""

from __future__ import annotations

__version__ = "0.1.0"
