"""Retention policy (the trims: by age, size, count, offset) and the cleaner mechanism
(compaction, delete by offsets, segment rewrite)."""
