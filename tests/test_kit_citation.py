"""Citations (joma_lib.kit.citation): every figure citable, and the companion's own entry the same everywhere."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from joma_lib.base.startup import check_environment
from joma_lib.kit import citation
from joma_lib.kit.cli import main
from joma_lib.kit.registry import figure_ids, get_spec

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def build(monkeypatch):
    """Set the build to a release (``build(True)``) or a development build (``build(False)``), optionally with a
    DOI in pyproject.toml; the cached project is cleared before and after."""
    real = citation.project

    def set_build(released: bool, doi: str = "") -> citation.Project:
        citation.project.cache_clear()
        version = citation.project().version
        if released:
            monkeypatch.setenv(citation.RELEASE_ENV, f"v{version}")
        else:
            monkeypatch.delenv(citation.RELEASE_ENV, raising=False)
        citation.project.cache_clear()
        proj = dataclasses.replace(citation.project(), doi=doi)
        monkeypatch.setattr(citation, "project", lambda: proj)
        return proj

    yield set_build
    real.cache_clear()


def test_citation_cff_and_zenodo_give_the_companion_entry_the_citations_use():
    """CITATION.cff and .zenodo.json name the companion, its version, addresses and DOI as the figures' cite blocks
    do (their one source: pyproject.toml and joma_lib.kit.citation)."""
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    zenodo = json.loads((ROOT / ".zenodo.json").read_text())
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    proj = citation.project()
    assert cff["title"] == zenodo["title"] == citation.COMPANION_TITLE
    assert [a["name"] for a in cff["authors"]] == [c["name"] for c in zenodo["creators"]] == [citation.COMPANION_AUTHOR]
    assert str(cff["version"]) == zenodo["version"] == proj.version
    assert cff["repository-code"] == proj.repository == urls["Repository"]
    assert cff["url"] == proj.site
    assert cff.get("doi", "") == proj.doi == urls.get("DOI", "").removeprefix("https://doi.org/")
    paper = cff["references"][0]
    assert paper["title"] in citation.PAPER and paper["identifiers"][0]["value"] in citation.PAPER
    assert all(f"{a['given-names']} {a['family-names']}" in citation.PAPER for a in paper["authors"])
    assert zenodo["related_identifiers"][0]["identifier"] == paper["identifiers"][0]["value"]


def test_a_release_cites_the_versioned_anchor_and_its_doi(build, capsys):
    proj = build(True, doi="10.5281/zenodo.1234567")
    cited = citation.cite("fig4")
    url = f"{proj.site}v{proj.version}/book/theorem4.html#fig4"
    assert f"url          = {{{url}}}," in cited.bibtex and cited.text.endswith(url)
    assert "doi          = {10.5281/zenodo.1234567}," in cited.bibtex and "doi:10.5281/zenodo.1234567" in cited.text
    assert f"version      = {{{proj.version}}}," in cited.bibtex
    assert get_spec("fig4").title in cited.bibtex and "(id fig4, label fig4)" in cited.text
    assert "reproducing Fig. 4 of" in cited.text and "arXiv:2310.00535" in cited.bibtex
    assert main(["cite", "fig4"]) == 0
    assert capsys.readouterr().out == f"{cited.bibtex}\n\n{cited.text}\n"


def test_a_development_build_cites_latest_with_its_commit_and_no_doi(build):
    proj = build(False, doi="10.5281/zenodo.1234567")
    cited = citation.cite("c-thm2-saliency")
    assert f"{proj.site}latest/book/theorem2.html#c-thm2-saliency" in cited.bibtex
    assert "development build at commit" in cited.text and "doi" not in cited.bibtex
    assert "a companion figure (Theorem 2, saliency), not in the paper, to" in cited.text


def test_a_release_tag_that_is_not_the_version_is_refused(monkeypatch):
    citation.project.cache_clear()
    monkeypatch.setenv(citation.RELEASE_ENV, "v99.0.0")
    with pytest.raises(ValueError, match="JOMA_RELEASE_TAG must be unset or v"):
        citation.project()
    citation.project.cache_clear()


def test_every_figure_has_a_well_formed_citation_of_its_page(build):
    build(True)
    keys = set()
    for fig_id in figure_ids():
        bibtex = citation.cite(fig_id).bibtex
        assert bibtex.count("{") == bibtex.count("}"), fig_id
        keys.add(re.match(r"@misc\{([\w-]+),", bibtex).group(1))  # type: ignore[union-attr]
        page = re.search(r"/v[\d.]+/(\S+)\.html#" + re.escape(fig_id) + "}", bibtex)
        assert page and (ROOT / f"{page.group(1)}.md").is_file(), fig_id
    assert len(keys) == len(figure_ids())


def test_every_citation_escapes_what_latex_reads_as_commands_outside_its_url(build):
    """Fig. 3's title has ``U_C^T``: a bare ``^`` (or ``~``, ``&``, ``_``, ...) in a BibTeX field stops LaTeX
    ("Missing $ inserted") or changes the text where a reader cites the figure; the url is read verbatim."""
    build(False)
    for fig_id in figure_ids():
        for name, value in re.findall(r"^  (\w+)\s+= \{(.*)\},$", citation.cite(fig_id).bibtex, flags=re.M):
            if name != "url":
                assert not re.search(r"(?<!\\)[\^~&%$#_]", value), (fig_id, name, value)
    assert r"{V(t) = U\_C\^{}T W(t) and" in citation.cite("fig3").bibtex


def test_a_checkout_with_local_changes_cites_its_commit_as_changed(monkeypatch, tmp_path):
    """The commit alone would name numbers it did not make; a file git does not track changes nothing."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              capture_output=True, text=True, check=True).stdout.strip()

    (tmp_path / "pyproject.toml").write_text("[project]\n")
    git("init", "-q")
    git("add", "pyproject.toml")
    git("commit", "-q", "-m", "first")
    monkeypatch.setattr(citation, "PYPROJECT", tmp_path / "pyproject.toml")
    citation.git_commit.cache_clear()
    try:
        (tmp_path / "notes.txt").write_text("untracked")
        assert citation.git_commit() == git("rev-parse", "HEAD")
        (tmp_path / "pyproject.toml").write_text("[project]\nversion = '9'\n")
        citation.git_commit.cache_clear()
        assert citation.git_commit() == git("rev-parse", "HEAD") + " +local changes"
    finally:
        citation.git_commit.cache_clear()


def test_the_doi_is_read_from_its_address_and_a_release_tag_is_checked_at_start_up(monkeypatch, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nversion = "9.9.9"\n[project.urls]\nRepository = "https://github.com/x/y"\n'
        'Documentation = "https://x.github.io/y"\nDOI = "https://doi.org/10.5281/zenodo.42"\n')
    monkeypatch.setattr(citation, "PYPROJECT", tmp_path / "pyproject.toml")
    citation.project.cache_clear()
    try:
        assert citation.project() == citation.Project("9.9.9", "https://github.com/x/y", "https://x.github.io/y/",
                                                      "10.5281/zenodo.42")
    finally:
        citation.project.cache_clear()
    monkeypatch.setenv(citation.RELEASE_ENV, "9.9.9")
    with pytest.raises(ValueError, match=r"JOMA_RELEASE_TAG must be a release tag v<version>, got '9.9.9'"):
        check_environment()


def test_an_installed_package_names_the_commit_pip_installed_and_never_asks_git(monkeypatch, tmp_path):
    class Dist:
        def read_text(self, name: str) -> str:
            assert name == "direct_url.json"
            return json.dumps({"url": "https://github.com/x/y", "vcs_info": {"vcs": "git", "commit_id": "abc123"}})

    monkeypatch.setattr(citation, "PYPROJECT", tmp_path / "pyproject.toml")  # no checkout around the package
    monkeypatch.setattr(citation.metadata, "distribution", lambda name: Dist())
    monkeypatch.setattr(citation.subprocess, "run", lambda *a, **k: pytest.fail("git was asked"))
    citation.git_commit.cache_clear()
    try:
        assert citation.git_commit() == "abc123"
    finally:
        citation.git_commit.cache_clear()


def test_a_companion_reference_with_brackets_inside_keeps_them_balanced(build):
    build(False)
    cited = citation.cite("c-fig5-attention")  # paper_ref "companion (Fig. 5(b))"
    assert "a companion figure (Fig. 5(b)), not in the paper, to" in cited.text
