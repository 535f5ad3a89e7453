"""The theorems3_4 chapter (`book/theorems3_4.md`)."""
