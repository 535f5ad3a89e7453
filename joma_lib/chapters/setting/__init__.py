"""The setting chapter (`book/setting.md`)."""
