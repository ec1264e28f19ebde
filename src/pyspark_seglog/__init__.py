"""Automatic registration of ``format("seglog")``: pyspark (>= 4) imports every top-level
module named ``pyspark_*`` and registers its ``DefaultSource`` under ``DefaultSource.name()``.
"""

from __future__ import annotations

from seglog.spark import SeglogDataSource as DefaultSource

__all__ = ["DefaultSource"]
