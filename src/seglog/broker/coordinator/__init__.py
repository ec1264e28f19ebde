"""Coordinators: the classic consumer-group coordinator (``groups``, its data in
``group_model``), committed offsets in the internal compacted topic
``__consumer_offsets`` (``committed``), and KIP-932 share groups: membership and
assignment (``share_groups``), one share partition over a durable subscription
(``share_partition``), share sessions (``share_sessions``) and what is persisted where
(``share_state``, the internal topic ``__share_group_state``)."""
