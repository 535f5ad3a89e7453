"""The theorem2 chapter (`book/theorem2.md`)."""
