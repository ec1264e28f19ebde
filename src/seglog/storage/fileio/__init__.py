"""Files on disk: segment file names, directory fsync, the one atomic-write helper, the
log directory lock, and the file counters every layer above reports into."""
