"""Runnable examples of seglog (``python -m examples.flights`` is the flights demo)."""
