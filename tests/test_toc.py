"""The chapter list has one source of truth, `_toc.yml`: the README's chapter table, the intro's map and the
figure registry must agree with it (CONTRIBUTING.md, "Add a chapter")."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from joma_lib.kit.registry import registry

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_PART = "Reference"  # the reproduction guide and the bibliography: not chapters of the paper


def toc_chapters() -> dict[str, list[str]]:
    """``{part caption: [chapter files]}`` in `_toc.yml` order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return {part["caption"]: [ch["file"] for ch in part["chapters"]] for part in toc["parts"]}


def content_chapters() -> list[str]:
    return [f for caption, files in toc_chapters().items() if caption != REFERENCE_PART for f in files]


def test_every_toc_file_exists():
    for files in toc_chapters().values():
        for file in files:
            assert (ROOT / file).is_file(), f"_toc.yml lists {file}, which does not exist"


def test_readme_chapter_table_lists_exactly_the_toc_chapters_in_order():
    rows = re.findall(r"^\| `(book/[\w.]+\.md)` \|", (ROOT / "README.md").read_text(), flags=re.M)
    assert rows == content_chapters()


def test_intro_map_covers_exactly_the_toc_chapters():
    intro = (ROOT / "book" / "intro.md").read_text()
    table = "\n".join(line for line in intro.splitlines() if line.startswith("|"))
    mapped = {f"book/{name}.md" for name in re.findall(r"\{doc\}`(\w+)`", table)}
    assert mapped == set(content_chapters())


def test_every_figure_belongs_to_a_toc_chapter():
    root = yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]  # the intro shows the book's opening figure
    chapters = {root} | {f for files in toc_chapters().values() for f in files}
    for fig_id, spec in registry().items():
        assert spec.chapter in chapters, f"figure {fig_id}: chapter {spec.chapter} is not in _toc.yml"
