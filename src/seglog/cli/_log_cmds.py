"""Placeholder: filled in by the layer's owner (see docs/DESIGN.md)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    del app
