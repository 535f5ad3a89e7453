"""The chapter list has one source of truth, `_toc.yml`: the README's chapter table, the intro's map and the
figure registry must agree with it (CONTRIBUTING.md, "Add a page"). The checks live in `_ext/book_layout.py`,
which `tests/test_contributing.py` also runs on a copy of the book with the recipe's page added."""

from __future__ import annotations

from pathlib import Path

import book_layout

from joma_lib.kit.registry import registry

ROOT = Path(__file__).resolve().parents[1]


def test_every_toc_file_exists():
    assert book_layout.missing_pages(ROOT) == []


def test_every_notebook_page_is_in_the_toc():
    assert book_layout.pages_outside_toc(ROOT) == []


def test_readme_chapter_table_lists_exactly_the_toc_chapters_in_order():
    assert book_layout.readme_errors(ROOT) == []


def test_intro_map_covers_exactly_the_toc_chapters():
    assert book_layout.intro_map_errors(ROOT) == []


def test_every_figure_belongs_to_a_toc_chapter():
    chapters = {fig_id: spec.chapter for fig_id, spec in registry().items()}
    assert book_layout.figure_page_errors(ROOT, chapters) == []
