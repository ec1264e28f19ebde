"""Lazy public names of a package (PEP 562 module ``__getattr__``).

A package lists where each public name lives and imports the module on first use, so
``import seglog.storage`` (or broker, columnar, schemas, iceberg) stays cheap: the client
commands start fast and pyiceberg or pyarrow load only when a name that needs them is
used. Below every layer: it imports only the standard library.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["load_export"]


def load_export(package: str, where: Mapping[str, str | tuple[str, str]], name: str) -> Any:
    """``name`` of ``package``, imported from where ``where`` places it and cached in the
    package's namespace (later lookups do not come here). ``where[name]``: a submodule
    relative to ``package`` holding an attribute of the same name, or ``(absolute module,
    attribute)``. Raises AttributeError for a name ``where`` does not list."""
    found = where.get(name)
    if found is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module, attr = (f"{package}.{found}", name) if isinstance(found, str) else found
    value = getattr(importlib.import_module(module), attr)
    sys.modules[package].__dict__[name] = value
    return value
