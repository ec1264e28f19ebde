"""The log manager: topics and their partition logs (``topics``), group-commit fsync
waiters (``durability``), retention and the cleaner thread (``retention``), idempotent
producer state and its snapshot (``producers``, ``producer_recovery``), the broker's own
persisted facts (``cluster_state``) and the internal topic names (``internal_topics``)."""
