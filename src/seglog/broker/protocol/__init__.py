"""The broker's protocol layer."""
