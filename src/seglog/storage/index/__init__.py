"""Indexes beside a segment: the offset index and the time index (Kafka's ``.index`` and
``.timeindex``) and the key index."""
