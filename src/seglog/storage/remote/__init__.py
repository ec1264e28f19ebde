"""Tiered storage (Kafka's KIP-405): closed segments copied to an object store, read back
transparently through a bounded local cache (see ``tier.py``)."""
