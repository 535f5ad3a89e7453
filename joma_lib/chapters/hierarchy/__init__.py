"""The hierarchy chapter (`book/hierarchy.md`)."""
