"""Publishing: the repository URL lives in pyproject.toml only, and everything that names it agrees; the install
cell of the chapters (Colab, Binder, a wheel) is written once, in _ext/install_cell.py, and reaches every notebook."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import install_cell
import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]


def repository_url() -> str:
    """The one source of the repository's address: ``[project.urls] Repository`` of pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


def chapters() -> list[Path]:
    return sorted(p for p in (ROOT / "book").glob("*.md") if "\nkernelspec:" in p.read_text())


def test_config_and_citation_use_the_pyproject_url():
    url = repository_url()
    assert url.startswith("https://github.com/")
    config = (ROOT / "_config.yml").read_text()
    assert re.search(r"^repository:\n  url: (\S+)$", config, re.M).group(1) == url  # type: ignore[union-attr]
    citation = (ROOT / "CITATION.cff").read_text()
    assert re.search(r'^repository-code: "([^"]+)"$', citation, re.M).group(1) == url  # type: ignore[union-attr]


def test_the_install_cell_is_written_once_and_installs_from_the_pyproject_url():
    code = install_cell.install_code()
    assert install_cell.repository_url() == repository_url()
    assert f'"joma-companion @ git+{repository_url()}"' in code and 'os.environ.get("JOMA_WHEEL")' in code
    compile(code, "install cell", "exec")
    for page in (ROOT / "book").glob("*.md"):  # the pages leave it to _ext/install_cell.py
        assert install_cell.MARKER not in page.read_text(), f"{page.name} spells the install cell; remove it"


def _first_import(text: str) -> int:
    return min(i for i in (text.find("from joma_lib"), text.find("import joma_lib")) if i >= 0)


def test_every_chapter_that_imports_joma_lib_is_read_with_the_install_cell_first():
    expected = "```{code-cell} ipython3\n:tags: [remove-cell]\n" + install_cell.install_code()
    pages = [p for p in chapters() if "joma_lib" in p.read_text()]
    assert len(pages) >= 8
    for page in pages:
        text = install_cell.with_install_cell(page.read_text())
        assert 0 <= text.find(expected) < _first_import(text), f"{page.name}: no install cell before joma_lib"
        assert text.find(expected) == text.find("```{code-cell}"), f"{page.name}: the install cell is not the first"
        assert install_cell.with_install_cell(text) == text  # inserted once


def test_every_twin_has_the_install_cell_as_its_first_code_cell(tmp_path):
    pages = chapters()
    install_cell.main(["-o", str(tmp_path), *map(str, pages)])
    for page in pages:
        nb = nbformat.read(tmp_path / f"{page.stem}.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        if not code:  # a page without code (the symbol table) needs no install
            assert "joma_lib" not in page.read_text()
            continue
        assert code[0].source.rstrip("\n") == install_cell.install_code().rstrip("\n"), page.name
        assert code[0].metadata["tags"] == ["remove-cell"]
        assert len(code) == page.read_text().count("```{code-cell}") + 1, page.name


def test_every_twin_writer_uses_the_install_cell_script():
    assert "    install_cell: _ext\n" in (ROOT / "_config.yml").read_text()  # the book
    assert "_ext/install_cell.py $(BOOK_MD)" in (ROOT / "Makefile").read_text()  # make twins
    assert "_ext/install_cell.py -o" in (ROOT / ".ci" / "colab_rehearsal.sh").read_text()  # the rehearsal
    workflow = (ROOT / ".github" / "workflows" / "notebooks.yml").read_text()  # the notebooks branch (Colab)
    assert "python _ext/install_cell.py" in workflow and "jupytext --to ipynb" not in workflow


def test_no_other_file_spells_the_repository_url():
    url = repository_url()
    allowed = {"pyproject.toml", "_config.yml", "CITATION.cff"}
    for path in [*ROOT.glob("*.*"), *(ROOT / "book").glob("*.md"), *(ROOT / "binder").glob("*")]:
        if path.is_file() and path.name not in allowed and path.suffix != ".ipynb":
            text = path.read_text(errors="replace")
            assert url.split("//")[1] not in text, f"{path.name} writes the repository URL; derive it instead"


def test_the_version_is_written_once_and_agreed_everywhere(tmp_path):
    """pyproject.toml's version is the book's (its footer and Sphinx's release), CITATION.cff's and .zenodo.json's;
    a release tag or a file that says otherwise is named."""
    import json
    import shutil
    from types import SimpleNamespace

    import book_release

    assert book_release.version_problems(ROOT) == []
    version = book_release.pyproject_version()
    assert book_release.version_problems(ROOT, tag=f"v{version}") == []
    assert book_release.version_problems(ROOT, tag="v99.0.0") == [
        f"the release tag is 99.0.0, pyproject.toml says {version}"]
    for name in ("pyproject.toml", "CITATION.cff", ".zenodo.json"):
        shutil.copy(ROOT / name, tmp_path / name)
    zenodo = json.loads((tmp_path / ".zenodo.json").read_text())
    (tmp_path / ".zenodo.json").write_text(json.dumps({**zenodo, "version": "0.0.1"}))
    assert book_release.version_problems(tmp_path) == [f".zenodo.json version is 0.0.1, pyproject.toml says {version}"]
    config = SimpleNamespace(version="", release="", html_theme_options={"extra_footer": "<p>x</p>"})
    book_release._footer(SimpleNamespace(confdir=str(ROOT)), config)  # type: ignore[arg-type]
    assert config.version == config.release == version
    assert config.html_theme_options["extra_footer"] == f'<p>x</p><p class="joma-version">Version {version}</p>'


def _built_site(folder: Path, text: str) -> Path:
    (folder / "book").mkdir(parents=True)
    (folder / "index.html").write_text(f"<p>{text}</p>")
    (folder / "book" / "fig.html").write_text(f"<figure id='c-a'>{text}</figure>")
    return folder


def test_the_offline_bundle_holds_site_notebooks_figures_and_claims(tmp_path):
    import zipfile

    import book_release
    import pytest

    html = _built_site(tmp_path / "html", "built")
    generated, store, notebooks = tmp_path / "gen", tmp_path / "store", tmp_path / "nb"
    for folder in (generated, store, notebooks):
        folder.mkdir()
    for name in ("c-a.npz", "c-a.receipt.json", "c-a.cite.json", "c-a.png"):
        (generated / name).write_text(name)
    for name in ("c-b.fp32.npz", "c-b.fp32.json", "c-b.receipt.json"):
        (store / name).write_text(name)
    (notebooks / "fig.ipynb").write_text("{}")
    kept = {"c-b": sorted(store.iterdir())}

    def bundle(ids: list[str]) -> Path:
        return book_release.make_bundle(tmp_path / "dist", "1.2.3", html, [notebooks / "fig.ipynb"], generated,
                                        kept, ids, '[{"id": "claim"}]')

    with pytest.raises(ValueError, match=r"neither shown by a page .* nor kept in the figure store: \[.c-c.\]"):
        bundle(["c-a", "c-b", "c-c"])
    assert not (tmp_path / "dist" / "joma-companion-v1.2.3-offline.zip").exists()
    path = bundle(["c-a", "c-b"])
    assert path.name == "joma-companion-v1.2.3-offline.zip"
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        top = "joma-companion-v1.2.3/"
        assert {top + n for n in ("index.html", "README.txt", "claims.json", "html/index.html", "html/book/fig.html",
                                  "notebooks/fig.ipynb", "figures/c-a.npz", "figures/c-a.receipt.json",
                                  "figures/c-a.cite.json", "figures/c-b.fp32.npz", "figures/c-b.fp32.json",
                                  "figures/c-b.receipt.json")} <= names
        assert 'url=html/index.html' in archive.read(top + "index.html").decode()
        assert archive.getinfo(top + "figures/c-a.png").compress_type == zipfile.ZIP_STORED


def test_the_site_keeps_every_release_beside_latest_and_old_addresses_redirect(tmp_path):
    import json
    import zipfile

    import book_release
    import pytest

    releases = tmp_path / "releases"
    for version in ("0.1.0", "0.10.0", "0.2.0"):
        site = _built_site(tmp_path / f"site-{version}", f"release {version}")
        book_release.make_bundle(releases, version, site, [ROOT / "README.md"], tmp_path, {}, [], "[]")
    latest = _built_site(tmp_path / "main", "main")
    out = tmp_path / "out"
    zips = sorted(releases.glob("*.zip"))
    assert book_release.assemble_site(out, latest, zips) == ["v0.10.0", "v0.2.0", "v0.1.0"]
    assert (out / "latest" / "book" / "fig.html").read_text() == "<figure id='c-a'>main</figure>"
    assert (out / "v0.2.0" / "book" / "fig.html").read_text() == "<figure id='c-a'>release 0.2.0</figure>"
    assert json.loads((out / "versions.json").read_text())["releases"] == ["v0.10.0", "v0.2.0", "v0.1.0"]
    stub = (out / "book" / "fig.html").read_text()  # the address before versions: to latest/, anchor kept
    assert ('url=../latest/book/fig.html' in stub
            and 'location.replace("../latest/book/fig.html" + location.hash)' in stub)
    assert '<a href="../v0.1.0/book/fig.html">v0.1.0</a>' in stub
    (latest / "book" / "theorem3.html").write_text("<figure id='c-thm3-relu'></figure>")  # a page split in two
    (latest / "book" / "theorem4.html").write_text("<figure id='fig4'></figure>")
    (latest / "book" / "theorem1.html").write_text("<html><head></head><figure id='c-invariant-residual'></figure>")
    (latest / "book" / "figs2_3.html").write_text("<figure id='fig2a'></figure><p id='c-invariant-residual'></p>")
    book_release.assemble_site(out, latest, zips)
    kept = (out / "latest" / "book" / "theorem1.html").read_text()  # an anchor it gave away goes to the new page
    assert ('({"fig2a": "../book/figs2_3.html"})[location.hash.slice(1)]' in kept
            and kept.index("<script>") < kept.index("</head>"))
    moved = (out / "latest" / "book" / "theorems3_4.html").read_text()  # its anchor picks the page
    assert '{"c-thm3-relu": "../book/theorem3.html"}' in moved and '|| "../book/theorem4.html"' in moved
    assert 'url=../book/theorem4.html' in moved and "fig4" not in moved
    assert 'location.replace("../latest/book/theorems3_4.html"' in (out / "book" / "theorems3_4.html").read_text()
    bad = releases / "joma-companion-v9.9.9-offline.zip"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("joma-companion-v9.9.9/html/../../evil.html", "x")
    with pytest.raises(ValueError, match="unsafe path"):
        book_release.assemble_site(out, latest, [bad])
    with pytest.raises(ValueError, match="--latest must be a built site"):
        book_release.assemble_site(out, tmp_path / "none", [])


def test_the_release_workflow_builds_like_the_site_and_ci_runs_its_steps():
    """release.yml: a vX.Y.Z tag, the site's own build (book.yml) as that release, one job that writes; book.yml's
    release steps are the commands .ci/run runs offline (one script, _ext/book_release.py, no second copy)."""
    import yaml

    workflows = ROOT / ".github" / "workflows"
    release = yaml.safe_load((workflows / "release.yml").read_text())
    assert release[True]["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+"] and release["permissions"] == {}
    jobs = release["jobs"]
    assert jobs["build"]["uses"] == "./.github/workflows/book.yml"
    assert jobs["build"]["with"]["release-tag"] == "${{ github.ref_name }}"
    assert [name for name, job in jobs.items() if "write" in job["permissions"].values()] == ["publish", "site"]
    assert jobs["publish"]["permissions"] == {"contents": "write"} and jobs["site"]["uses"].endswith("/pages.yml")
    assert "dist/joma-companion-\"$TAG\"-offline.zip" in jobs["publish"]["steps"][1]["run"]
    build = yaml.safe_load((workflows / "book.yml").read_text())["jobs"]["build"]
    steps = " ".join(str(step.get("run", "")) for step in build["steps"])
    ci = (ROOT / ".ci" / "run").read_text()
    for command in ("_ext/book_release.py check-version", "_ext/book_release.py bundle --out",
                    "_ext/book_release.py site --latest _build/html --releases"):
        assert command in steps and command in ci, command
    assert build["env"]["JOMA_RELEASE_TAG"] == "${{ inputs.release-tag }}"
    assert steps.index("make book-strict") < steps.index("--from $JOMA_FIGURE_STORE --keep") < steps.index("bundle")
    for path in workflows.glob("*.yml"):
        for ref in re.findall(r"uses: ([\w./-]+)@(\S+)", path.read_text()):
            assert re.fullmatch(r"[0-9a-f]{40}", ref[1]), f"{path.name}: {ref[0]} is not pinned to a commit"


def test_ci_jobs_that_run_the_tests_clone_the_whole_history():
    """tests/test_threshold_history.py skips itself in a shallow clone, and actions/checkout clones one commit
    unless told otherwise: every job of ci.yml that runs `make test` checks out with fetch-depth 0."""
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())["jobs"]
    testing = [name for name, job in jobs.items()
               if any("make test" in str(step.get("run", "")) for step in job["steps"])]
    assert testing
    for name in testing:
        (checkout,) = [step for step in jobs[name]["steps"]
                       if str(step.get("uses", "")).startswith("actions/checkout@")]
        assert checkout["with"]["fetch-depth"] == 0, name
        assert checkout["with"]["persist-credentials"] is False, name
