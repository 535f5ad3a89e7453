"""The performance chapter (`book/performance.md`)."""
