"""Coordinators: the classic consumer-group coordinator (``groups``, its data in
``group_model``), KIP-848 consumer groups (``consumer_groups``: the heartbeat state
machine with its timers and persistence; ``consumer_group_rules``: Kafka's per-heartbeat
rules; ``consumer_group_model``: members, groups, snapshots; ``assignors``: uniform and
range) and committed offsets in the internal compacted topic ``__consumer_offsets``
(``committed``, which also keeps the KIP-848 groups' snapshots)."""
