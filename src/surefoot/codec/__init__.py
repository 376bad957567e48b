"""JSON codec for everything surefoot stores. Never pickle: reading a journal or a shared
store can never execute code.

Plain JSON types pass through. A small tagged extension covers what agents return::

    {"$sf": "datetime", "v": "2026-11-30T14:00:00+00:00"}
    {"$sf": "bytes", "v": "<base64>"}
    {"$sf": "obj", "t": "pkg.mod.Finding", "v": {...fields...}}   dataclasses, pydantic models
    {"$sf": "enum", "t": "pkg.mod.Color", "v": "red"}            enums not based on str/int
    {"$sf": "set", "v": [...]}  {"$sf": "tuple", "v": [...]}
    {"$sf": "date" | "time" | "timedelta" | "decimal" | "uuid", "v": ...}

A tagged object decodes back to its class only if the class was registered with
:func:`register` (decoding never imports a module named by the data); otherwise it decodes to
the dict of its fields. The key ``"$sf"`` is reserved in dicts you store.

To get back exactly the type the code declared, whether registered or not, read by the
annotation: :func:`decode_as` (``decode_as(loads(text), list[Finding])``), :func:`loads_as`,
and :func:`check_annotation` to refuse at decoration time an annotation that cannot be
rebuilt safely. The type always comes from the annotation, never from the data.
"""

from __future__ import annotations

from ._as import check_annotation, decode_as, loads_as, return_annotation
from ._json import (
    TAG,
    Encoder,
    dumps,
    dumps_json_values,
    error_from_data,
    error_to_data,
    loads,
    register,
    type_name,
)

__all__ = [
    "TAG",
    "Encoder",
    "check_annotation",
    "decode_as",
    "dumps",
    "dumps_json_values",
    "error_from_data",
    "error_to_data",
    "loads",
    "loads_as",
    "register",
    "return_annotation",
    "type_name",
]
