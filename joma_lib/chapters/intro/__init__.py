"""The intro chapter (`book/intro.md`)."""
