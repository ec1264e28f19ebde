"""The partition log: state, appends, reads, sync and group commit, notifications,
blocking consume, the embedded messages API, typed logs, statistics and data directories."""
