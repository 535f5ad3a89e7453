"""The fig7 chapter (`book/fig7.md`)."""
