"""The theorem1 chapter (`book/theorem1.md`)."""
