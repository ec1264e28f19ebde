"""The broker's coordinator layer."""
