"""Coordinators: the classic consumer-group coordinator (``groups``, its data in
``group_model``), KIP-848 consumer groups (``consumer_groups``: the heartbeat state
machine with its timers and persistence; ``consumer_group_rules``: Kafka's per-heartbeat
rules; ``consumer_group_model``: members, groups, snapshots; ``assignors``: uniform and
range; ``group_migration``: ``group.consumer.migration.policy``), committed offsets in the
internal compacted topic ``__consumer_offsets`` (``committed``, which also keeps the
KIP-848 groups' snapshots), and KIP-932 share groups: membership and assignment
(``share_groups``), one share partition over a durable subscription
(``share_partition``), share sessions (``share_sessions``) and what is persisted where
(``share_state``, the internal topic ``__share_group_state``)."""
