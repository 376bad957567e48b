"""Checkers that judge a recorded history by itself, never by reading surefoot's code.

Each is written from a published algorithm and is proven able to fail on hand-made bad
histories (``tests/unit/testing``); ``docs/reliability.md`` lists them.

- ``check_register``: per-key linearizability of reads, writes and compare-and-set on a
  register with unique versions (Gibbons & Korach's version chains plus real-time order,
  as rystsov/fast-jepsen); O(n log n).
- ``check_list_append``: Elle's list-append analysis (Kingsbury & Alvaro, VLDB 2020):
  version orders from reads, ww / wr / rw / process / real-time edges, cycles as strongly
  connected components classified G0, G1c, G-single, G2-item; G1a, G1b, internal,
  duplicates, garbage reads, incompatible orders and lost updates.
- ``check_queue``: streams: acknowledged appends delivered or dead-lettered, nothing
  invented, one id one sequence number, order kept, redeliveries counted.
- ``check_steps``: durable steps: none run again after its result was journalled, one key
  per step, each effect key applied once at the recipient.

Every checker returns a ``CheckResult``: ``valid``, the ``anomalies`` (each with its
``kind``, the operations involved and an explanation), ``kinds()`` and ``stats``.
"""

from __future__ import annotations

from ._append import MODELS, check_list_append
from ._queue import check_queue
from ._register import check_register
from ._result import Anomaly, CheckResult
from ._steps import check_steps

__all__ = [
    "MODELS",
    "Anomaly",
    "CheckResult",
    "check_list_append",
    "check_queue",
    "check_register",
    "check_steps",
]
