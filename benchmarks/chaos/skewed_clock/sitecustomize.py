"""Loaded by Python at start-up when this folder is on PYTHONPATH (paused_holders.py's
``--clock python``): moves this process's wall clock (``time.time``, ``time.time_ns``) by
``SUREFOOT_SKEW`` seconds, leaving the monotonic clock and every wait alone. The
equivalent of libfaketime for Python code, without its broken ``pthread_cond_timedwait``
(under libfaketime 0.9.10 a ``threading.Event.wait(0.3)`` does not return)."""

import os
import time

_skew = float(os.environ.get("SUREFOOT_SKEW", "0") or 0)
if _skew:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _skew
    time.time_ns = lambda: _time_ns() + int(_skew * 1e9)
