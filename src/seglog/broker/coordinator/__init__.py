"""Coordinators: the classic consumer-group coordinator (``groups``, its data in
``group_model``) and committed offsets in the internal compacted topic
``__consumer_offsets`` (``committed``)."""
