"""Find an ``App`` by reference (``module:attr`` or ``path/to/file.py:attr``), for workers."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from ..errors import ConfigError
from ._app import App

__all__ = ["load_app"]


def load_app(ref: str) -> App:
    """Import the ``App`` named by ``ref``: ``package.module:app`` or ``file.py:app``.

    The current directory is importable, like ``python -m``.

    Raises:
        ConfigError: a malformed reference, a module that cannot be imported, a missing
            attribute, or an attribute that is not a ``surefoot.durable.App``.
    """
    mod_name, sep, attr = ref.partition(":")
    if not sep or not mod_name or not attr:
        raise ConfigError(
            f"--app must look like 'package.module:app' or 'path/to/file.py:app', got {ref!r}"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if mod_name.endswith(".py"):
            if not os.path.isfile(mod_name):
                raise ConfigError(f"--app file {mod_name!r} does not exist")
            name = os.path.splitext(os.path.basename(mod_name))[0]
            spec = importlib.util.spec_from_file_location(name, mod_name)
            if spec is None or spec.loader is None:
                raise ConfigError(f"--app file {mod_name!r} is not an importable Python file")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {mod_name!r} for --app {ref!r}: {exc}") from exc
    if not hasattr(module, attr):
        raise ConfigError(
            f"module {mod_name!r} has no attribute {attr!r}; pass --app package.module:attribute "
            "naming the object made with durable.App(...)"
        )
    app = getattr(module, attr)
    if not isinstance(app, App):
        raise ConfigError(
            f"{ref!r} is {type(app).__name__}, not a surefoot.durable.App; point --app at the "
            "object made with durable.App(...)"
        )
    return app
