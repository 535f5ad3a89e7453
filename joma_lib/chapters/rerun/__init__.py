"""The rerun chapter (`book/rerun.md`)."""
