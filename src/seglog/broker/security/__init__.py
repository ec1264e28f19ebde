"""The broker's security layer."""
