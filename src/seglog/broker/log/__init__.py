"""The broker's log layer."""
