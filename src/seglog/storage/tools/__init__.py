"""Whole-directory tools: check and recover (klevdb's Check / Recover), backup,
snapshot and restore, format migration."""
