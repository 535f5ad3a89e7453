"""The book's site extensions in _ext/: landing page, no thebe, no source maps, trimmed MathJax, the install cell."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import install_cell
import sphinx_mathjax
import sphinx_site


def test_landing_page_has_the_title_and_forwards_to_the_root_chapter():
    page = sphinx_site.landing_page("JoMA <worked>", "book/intro.html")
    assert "<title>JoMA &lt;worked&gt;</title>" in page
    assert 'content="0; url=book/intro.html"' in page and 'href="book/intro.html"' in page
    assert 'rel="icon"' in page


def test_thebe_assets_are_dropped_and_others_kept():
    keep = SimpleNamespace(filename="plotly.min.js", attributes={})
    thebe_inline = SimpleNamespace(filename=None, attributes={"body": 'const THEBE_JS_URL = "x"'})
    thebe_file = SimpleNamespace(filename="sphinx-thebe.js", attributes={})
    context = {"script_files": [keep, thebe_inline, thebe_inline, thebe_file],
               "css_files": ["sphinx-thebe.css", "a.css"]}
    sphinx_site._drop_thebe(None, "p", "page.html", context, None)  # type: ignore[arg-type]
    assert context["script_files"] == [keep]
    assert context["css_files"] == ["a.css"]


def test_source_maps_and_their_comments_are_removed(tmp_path):
    (tmp_path / "scripts").mkdir()
    js = tmp_path / "scripts" / "a.js"
    js.write_text("var a=1;\n//# sourceMappingURL=a.js.map")
    css = tmp_path / "b.css"
    css.write_text("p{}\n/*# sourceMappingURL=b.css.map */\n")
    (tmp_path / "scripts" / "a.js.map").write_text("{}")
    (tmp_path / "b.css.map").write_text("{}")
    assert sphinx_site.strip_source_maps(tmp_path) == 2
    assert not list(tmp_path.rglob("*.map"))
    assert "sourceMappingURL" not in js.read_text() + css.read_text()
    assert js.read_text().startswith("var a=1;") and css.read_text().startswith("p{}")


def test_mathjax_copy_leaves_out_accessibility_and_unused_packages(tmp_path):
    es5 = sphinx_mathjax.mathjax_es5_dir()
    if es5 is None:
        import pytest

        pytest.skip("django-static-mathjax not installed")
    app = SimpleNamespace(outdir=str(tmp_path), builder=SimpleNamespace(format="html"))
    sphinx_mathjax._copy(app, None)  # type: ignore[arg-type]
    out = tmp_path / "_static" / "mathjax"
    assert (out / "tex-chtml.js").exists() and (out / "input/tex/extensions/boldsymbol.js").exists()
    assert not (out / "sre").exists() and not (out / "a11y").exists()
    assert not (out / "input/tex/extensions/all-packages.js").exists()
    assert sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) < 3_000_000


def test_alt_text_is_the_captions_first_sentence():
    caption = ("Paper Fig. 2, Gaussian-shaped X. Left: the token frequencies X (see Fig. 3 and Eq. (4)). "
               "Right: the NC curve.")
    assert sphinx_site.first_sentence(caption) == "Paper Fig. 2, Gaussian-shaped X."
    assert sphinx_site.caption_alt(caption) == ("Paper Fig. 2, Gaussian-shaped X. Left: the token frequencies X "
                                                "(see Fig. 3 and Eq. (4)).")
    long_lead = "A" * 70 + " ends here. Second sentence."
    assert sphinx_site.caption_alt(long_lead) == "A" * 70 + " ends here."


def test_alt_text_is_set_on_the_images_of_a_figure():
    from docutils import nodes

    figure = nodes.figure("", nodes.image(uri="_build/abc123.png"),
                          nodes.caption("", "Companion figure. Left: residual. Right: more."))
    doc = nodes.document(None, None)  # type: ignore[arg-type]
    doc += figure
    sphinx_site._alt_from_captions(None, doc, "p")  # type: ignore[arg-type]
    assert next(iter(doc.findall(nodes.image)))["alt"] == "Companion figure. Left: residual."


def test_content_images_link_to_their_full_size_file_once():
    body = ('<figure><img alt="a" src="../_images/x.png" /></figure>'
            '<a href="y"><img src="../_images/y.png"/></a><img src="../_static/logo.png"/>')
    out = sphinx_site.link_images(body)
    assert '<a class="reference internal image-reference" href="../_images/x.png"><img alt="a"' in out
    assert out.count("image-reference") == 1  # already linked and theme images are left alone
    assert sphinx_site.link_images(out) == out


def test_the_book_reads_each_chapter_with_the_install_cell_before_its_first_code_cell():
    book = Path(__file__).resolve().parents[1] / "book"
    page = (book / "theorem1.md").read_text()
    source = [page]
    install_cell._source_read(None, "book/theorem1", source)  # type: ignore[arg-type]
    cell = "```{code-cell} ipython3\n:tags: [remove-cell]\n" + install_cell.install_code() + "```\n\n"
    first = page.index("```{code-cell}")
    assert source[0] == page[:first] + cell + page[first:]
    for plain in ("bibliography.md", "symbols.md"):  # not a notebook; a notebook without code
        text = (book / plain).read_text()
        source = [text]
        install_cell._source_read(None, plain, source)  # type: ignore[arg-type]
        assert source[0] == text


def test_the_install_cell_extension_hooks_source_read():
    hooks: list[str] = []
    app = SimpleNamespace(connect=lambda event, fn: hooks.append(event))
    assert install_cell.setup(app)["parallel_read_safe"]  # type: ignore[arg-type]
    assert hooks == ["source-read"]
