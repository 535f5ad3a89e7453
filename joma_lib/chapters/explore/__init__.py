"""The explore chapter (`book/explore.md`)."""
