"""The wikitext chapter (`book/wikitext.md`)."""
