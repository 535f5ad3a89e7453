"""The reader's extensions in _ext/: inline icons, the paper's theorem numbers, phone pictures, the plotly and
widget hooks; the deploy workflow."""

from __future__ import annotations

from pathlib import Path

import sphinx_figures
import sphinx_icons
import sphinx_paper_numbers
import sphinx_plotly  # _ext/, on sys.path via pytest's pythonpath
import sphinx_widgets  # _ext/
import yaml

ROOT = Path(__file__).resolve().parents[1]
# the shape of Font Awesome's all.min.js: icons of a pack, then the call that registers the pack
SCRIPT = ('var p={github:[496,512,[],"f09b","M1 2z"],"circle-half-stroke":[512,512,[9680,"adjust"],"f042",'
          '["M3 4z","M5 6z"]]};d("fab",p);var q={sun:[512,512,[9728],"f185","M7 8z"]};d("fas",q)')


def test_icons_are_read_from_the_script_per_pack_with_aliases():
    icons = sphinx_icons.read_icons(SCRIPT)
    assert icons["fab"]["github"] == (496, 512, ("M1 2z",))
    assert icons["fab"]["adjust"] == icons["fab"]["circle-half-stroke"] == (512, 512, ("M3 4z", "M5 6z"))
    assert "sun" in icons["fas"] and "sun" not in icons["fab"]


def test_icon_tags_become_svg_and_the_script_tag_goes():
    icons = sphinx_icons.read_icons(SCRIPT)
    page = ('<button><i class="fa-brands fa-github fa-lg" title="x"></i></button>'
            '<script defer src="../_static/scripts/fontawesome.js?digest=1"></script>')
    new, unknown = sphinx_icons.inline_icons(page, icons)
    assert not unknown and "fontawesome.js" not in new and "<i " not in new
    assert 'class="svg-inline--fa fa-github fa-lg"' in new and 'viewBox="0 0 496 512"' in new
    assert 'title="x"' in new and 'd="M1 2z"' in new


def test_a_page_with_an_unknown_icon_keeps_the_script():
    page = '<i class="fa-solid fa-nothing"></i><script src="_static/scripts/fontawesome.js"></script>'
    new, unknown = sphinx_icons.inline_icons(page, sphinx_icons.read_icons(SCRIPT))
    assert unknown == {"fa-solid fa-nothing"} and new == page


def test_theorems_get_the_papers_numbers_and_unmapped_ones_are_reported():
    numbers = {"a/thm1": {"theorem": {"thm-joma": (2, 1)}, "figure": {"f": (2, 1)}},
               "a/thm34": {"theorem": {"thm-3": (4, 1), "thm-x": (4, 2)}}}
    changed, missing = sphinx_paper_numbers.paper_numbers(numbers, {"thm-joma": 1, "thm-3": 3})
    assert numbers["a/thm1"]["theorem"]["thm-joma"] == (1,) and numbers["a/thm1"]["figure"]["f"] == (2, 1)
    assert numbers["a/thm34"]["theorem"] == {"thm-3": (3,), "thm-x": (4, 2)}
    assert changed == ["a/thm1", "a/thm34"] and missing == ["thm-x"]


def test_pages_without_a_chapter_number_letter_their_figures():
    """Appendix pages number their figures "A.1", "B.1" in reading order; the opening page numbers none."""
    includes = {"intro": ["setting", "audit", "performance"], "setting": []}
    order = sphinx_paper_numbers.toc_order(includes, "intro")
    assert order == ["intro", "setting", "audit", "performance"]
    # Sphinx counts on across the pages without a chapter number
    numbers = {"performance": {"figure": {"c-rerun-precision": (3,), "c-x": (2,)}, "table": {"t": (2,)}},
               "audit": {"figure": {"c-setting-pretrained": (1,)}}, "setting": {"figure": {"fig-block": (1, 1)}},
               "intro": {"figure": {"c-summary": (1,)}}}
    secnumbers = {"setting": {"": (1,)}, "audit": {}}
    changed = sphinx_paper_numbers.letter_unnumbered_pages(numbers, secnumbers, order)
    assert changed == ["audit", "intro", "performance"]
    assert numbers == {"performance": {"figure": {"c-x": ("B", 1), "c-rerun-precision": ("B", 2)},
                                       "table": {"t": ("B", 1)}},
                       "audit": {"figure": {"c-setting-pretrained": ("A", 1)}},
                       "setting": {"figure": {"fig-block": (1, 1)}}, "intro": {}}


def test_config_numbers_every_theorem_of_the_book():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]["joma_paper_theorems"]
    labels = []
    for page in (ROOT / "book").glob("*.md"):
        lines = page.read_text().splitlines()
        labels += [lines[i + 1].split(":label:")[1].strip() for i, line in enumerate(lines)
                   if line.startswith("```{prf:theorem}") and ":label:" in lines[i + 1]]
    assert sorted(labels) == sorted(config), "every theorem box needs its paper number in joma_paper_theorems"
    assert sorted(config.values()) == [1, 2, 3, 4, 5]


def test_a_figure_with_a_phone_layout_becomes_a_picture(tmp_path):
    body = ('<figure class="align-default" id="fig2a"><a href="../_images/ab.png"><img alt="x" '
            'src="../_images/ab.png" /></a><figcaption>c</figcaption></figure>'
            '<figure id="other"><img src="../_images/c.png"/></figure>')
    phone = tmp_path / "fig2a.phone.png"
    new, used = sphinx_figures.picture(body, {"fig2a": phone})
    assert used == {"fig2a.phone.png": phone}
    assert ('<picture><source media="(max-width: 640px)" srcset="../_images/fig2a.phone.png"><img alt="x" '
            'src="../_images/ab.png" /></picture>') in new
    assert new.count("<picture>") == 1 and sphinx_figures.picture(new, {"fig2a": phone})[0] == new


def test_the_receipt_and_citation_the_harness_wrote_go_under_their_figure(tmp_path):
    """Shown from the files the harness wrote, escaped, after the figure; a figure without them is left alone."""
    import json

    receipt = {"fig_id": "fig2a", "lines": [["figure", "fig2a (Fig. 2): <a & b>"], ["date", "2026-11-25 10:00 UTC"]]}
    (tmp_path / "fig2a.receipt.json").write_text(json.dumps(receipt))
    (tmp_path / "fig2a.cite.json").write_text(json.dumps({"bibtex": "@misc{k,\n  url = {u},\n}", "text": "T & U"}))
    body = '<figure id="fig2a"><img src="a.png"/></figure><p>x</p><figure id="other"><img src="b.png"/></figure>'
    new = sphinx_figures.with_receipts(body, tmp_path)
    figure_end = new.index("</figure>") + len("</figure>")
    assert new[figure_end:].startswith('<details class="joma-receipt"><summary>Receipt of this figure (fig2a)')
    assert "<th>figure</th><td>fig2a (Fig. 2): &lt;a &amp; b&gt;</td>" in new and "T &amp; U" in new
    assert '<pre class="joma-cite-bibtex">@misc{k,\n  url = {u},\n}</pre>' in new
    assert "python -m joma_lib.figures receipt fig2a" in new and "python -m joma_lib.figures cite fig2a" in new
    assert new.count("<details") == 2 and new.endswith('<p>x</p><figure id="other"><img src="b.png"/></figure>')
    assert sphinx_figures.with_receipts(body, tmp_path / "none") == body

def test_the_site_is_deployed_with_the_network():
    """book.yml (the build of pages.yml and release.yml): no offline switches, the authors' runs are fetched, and the
    build fails on an offline fallback."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    build = workflow["jobs"]["build"]
    assert not {"HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"} & set(build.get("env", {}))
    steps = " ".join(str(step.get("run", "")) for step in build["steps"])
    assert "wikitext2_multilayer_lr.pt" in steps and "JOMA_OFFICIAL_DIR" in steps
    assert steps.index("wikitext2_multilayer_lr.pt") < steps.index("make book-strict") < steps.index("Not shown:")


def test_the_deploy_guard_matches_the_printed_note_and_not_the_code_that_prints_it():
    """The offline notes are printed by visible code cells: each guard must match the output line only."""
    import re

    build = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())["jobs"]["build"]
    steps = " ".join(str(step.get("run", "")) for step in build["steps"])
    patterns = {page: pattern for pattern, page in
                re.findall(r'grep (?:-E )?"([^"]+)" _build/html/book/(\w+)\.html', steps)}
    assert set(patterns) == {"fig7", "wikitext"}
    # as the built fig7.html shows them: the highlighted code cell, then its output
    code = ('<span class="s2">"Not shown: </span><span class="si">{</span><span class="n">err</span>'
            '<span class="si">}</span><span class="s2">. The stand-in below is used instead."</span>')
    output = "<pre><span></span>Not shown: Pythia checkpoints come from the Hugging Face hub, which is not reachable"
    assert re.search(patterns["fig7"], output) and not re.search(patterns["fig7"], code)
    harness = (ROOT / "joma_lib" / "kit" / "harness.py").read_text()
    assert re.search(patterns["wikitext"], harness), "the guard no longer matches the note the harness prints"
    assert not re.search(patterns["wikitext"], (ROOT / "book" / "wikitext.md").read_text())


def test_sphinx_hook_adds_plotly_only_to_pages_with_a_graph(toy_explorer, tmp_path):
    added = []

    class App:
        outdir = tmp_path
        builder = type("B", (), {"format": "html"})()

        def add_js_file(self, name):
            added.append(name)

    app = App()
    sphinx_plotly._add_script(app, "a", "page.html", {"body": "<p>no plot</p>"}, None)
    assert added == []
    sphinx_plotly._add_script(app, "b", "page.html", {"body": f"<p>text</p>{toy_explorer().html('x')}"}, None)
    assert added == [sphinx_plotly.bundle_name()]
    sphinx_plotly._write_bundle(app, None)
    bundle = tmp_path / "_static" / sphinx_plotly.bundle_name()
    assert bundle.stat().st_size > 1_000_000 and "Plotly" in bundle.read_text(encoding="utf-8")[:5000]


def test_sphinx_hook_drops_the_widget_state_and_scripts():
    js = {"ipywidgets_state": (None, {"body": "{}"}), "ipywidgets_0": ("https://cdn/x.js", {}), "other": ("a.js", {})}
    env = type("Env", (), {"nb_metadata": {"page": {"js_files": js}}})()
    app = type("App", (), {"env": env})()
    sphinx_widgets._drop_widget_scripts(app, "page", "page.html", {}, None)
    assert list(js) == ["other"]
    sphinx_widgets._drop_widget_scripts(app, "absent", "page.html", {}, None)  # pages without notebooks: no-op
