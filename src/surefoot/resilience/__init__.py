"""Resilient calls: classification, backoff, retries, breakers, fallbacks, idempotency."""

from __future__ import annotations

from . import faults
from .faults import ProviderError, ReplyLostError

__all__ = ["ProviderError", "ReplyLostError", "faults"]
