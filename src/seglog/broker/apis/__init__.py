"""The broker's apis layer."""
