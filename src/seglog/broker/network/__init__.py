"""The broker's network layer."""
