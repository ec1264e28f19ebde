"""The broker's config layer."""
