"""One meaning per symbol (book/symbols.md): no page gives a reserved symbol one of its old meanings again.

A text search cannot read mathematics, so the check is a heuristic: in the prose of every page (code cells
removed), a math span that uses a reserved symbol as a token must not stand in the same sentence as, and within
a few words of, a word naming one of the meanings the symbol table took away from it ("temperature" near $T$,
"top layer" near $A$, ...). The symbol table itself is the only page that may mention them together.

Figures speak too: the axis labels and titles of every registered figure (read from the source of its drawing
module, so nothing is drawn) count as one short text with the figure's title and its caption on its page. A
reserved symbol in a label must not appear where that text names one of the symbol's old meanings.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
SYMBOL_TABLE = "symbols.md"
NOT_TEACHING = {SYMBOL_TABLE, "claims.md", "performance.md"}  # the table itself, and pages without this notation
WINDOW = 40  # characters either side of a math span that count as "near"


def _token(tex: str) -> re.Pattern[str]:
    """``tex`` as a whole token of a math span: not part of a longer command or name (``T`` in ``\\top`` is not)."""
    return re.compile(r"(?<![\\A-Za-z])" + re.escape(tex) + r"(?![A-Za-z])")


# symbol -> (its one meaning, the words that name the meanings it no longer has)
RESERVED: dict[str, tuple[str, tuple[str, ...]]] = {
    "T": ("sequence length", ("temperature",)),
    "A": ("softmax normaliser", ("top layer", "top-layer", "classifier")),
    "b": ("attention weights", ("bias",)),
    "K": ("number of hidden nodes", ("level",)),
    r"\sigma": ("attention kernel", ("standard deviation", "spread")),
    "C": ("number of clusters", ("class",)),
    "k": ("hidden node", ("cluster", "component")),
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*{$])|\n\s*\n")
_MATH = re.compile(r"\$\$?[^$]+\$\$?")
_CODE_CELL = re.compile(r"^```+\{code-cell\}.*?^```+", flags=re.S | re.M)


def prose(text: str) -> str:
    """A page without its front matter and its code cells."""
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
    return _CODE_CELL.sub("", text)


def clashes(text: str) -> list[str]:
    """Every sentence of ``text`` where a reserved symbol stands near a word of one of its old meanings."""
    found = []
    for sentence in _SENTENCE_END.split(prose(text)):
        lowered = sentence.lower()
        for span in _MATH.finditer(sentence):
            near = lowered[max(0, span.start() - WINDOW):span.end() + WINDOW]
            for symbol, (_, old_meanings) in RESERVED.items():
                if _token(symbol).search(span.group(0)) and any(word in near for word in old_meanings):
                    found.append(f"{symbol!r} in {span.group(0)!r}: {' '.join(sentence.split())[:160]}")
    return found


LABEL_CALLS = {"set_xlabel", "set_ylabel", "set_title", "suptitle", "supxlabel", "supylabel", "set_label"}
LABEL_KEYWORDS = {"xlabel", "ylabel", "title"}  # ax.set(xlabel=...)


def _literal_text(node: ast.expr) -> str:
    """The constant text of a string or f-string node (the interpolated parts dropped); '' for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal_text(part) for part in node.values)
    return ""


def drawn_labels(source: str) -> list[str]:
    """Every axis label and title a drawing module's source sets: the literal text of its calls."""
    labels = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr in LABEL_CALLS and node.args:
            labels.append(_literal_text(node.args[0]))
        labels += [_literal_text(kw.value) for kw in node.keywords if kw.arg in LABEL_KEYWORDS]
    return [label for label in labels if label]


def caption(page_text: str, fig_id: str) -> str:
    """The caption of figure ``fig_id`` on a page (its ``{glue:figure}`` block), '' when the page has none."""
    found = re.search(r"^```+\{glue:figure\} " + re.escape(fig_id) + r"\n(.*?)^```+", page_text, flags=re.S | re.M)
    return found.group(1) if found else ""


def label_clashes(labels: list[str], context: str) -> list[str]:
    """Each label whose math uses a reserved symbol while the label or the figure's ``context`` names one of that
    symbol's old meanings (a label that names the symbol's one meaning, "hidden node $k$", says what it is)."""
    found = []
    for label in labels:
        near = (label + " " + context).lower()
        for span in _MATH.finditer(label):
            for symbol, (meaning, old_meanings) in RESERVED.items():
                if meaning in label.lower():
                    continue
                if _token(symbol).search(span.group(0)) and any(word in near for word in old_meanings):
                    found.append(f"{symbol!r} in the label {label!r}")
    return found


def figure_labels() -> dict[str, tuple[list[str], str]]:
    """Per drawing module of the registered figures: its labels, and the titles and captions of its figures."""
    from joma_lib.kit.registry import registry

    by_module: dict[str, tuple[list[str], str]] = {}
    for spec in registry().values():
        module = inspect.getmodule(spec.plot)
        assert module is not None and module.__file__ is not None, spec.fig_id
        labels, context = by_module.get(module.__name__, (drawn_labels(Path(module.__file__).read_text()), ""))
        page = ROOT / spec.chapter
        text = page.read_text() if page.exists() else ""
        by_module[module.__name__] = (labels, f"{context} {spec.title} {caption(text, spec.fig_id)}")
    return by_module


def teaching_pages() -> list[str]:
    return sorted(p.name for p in BOOK.glob("*.md") if p.name not in NOT_TEACHING)


@pytest.mark.parametrize("page", teaching_pages())
def test_no_reserved_symbol_takes_an_old_meaning(page: str) -> None:
    assert clashes((BOOK / page).read_text()) == []


def test_no_figure_label_gives_a_reserved_symbol_an_old_meaning() -> None:
    modules = figure_labels()
    assert len(modules) > 10 and sum(len(labels) for labels, _ in modules.values()) > 50  # the labels are read
    found = {name: label_clashes(labels, context) for name, (labels, context) in modules.items()}
    assert {name: clash for name, clash in found.items() if clash} == {}


def test_the_label_check_reads_labels_and_catches_an_old_meaning() -> None:
    source = ('ax.set_xlabel(r"spread $\\sigma$")\nax.set(ylabel=f"bias {1}: $b$", title="t")\n'
              'ax.plot([0], label="legend $T$")\n')
    assert drawn_labels(source) == ["spread $\\sigma$", "bias : $b$", "t"]
    assert label_clashes(["$v^\\top x+b>0$"], "at four states (v, bias)")      # the caption names the old meaning
    assert label_clashes(["$v^\\top x+\\beta>0$"], "at four states (v, bias)") == []
    assert label_clashes(["$\\Phi(k_c)$"], "the nearest cluster centre")           # k_c, where the page has kappa_c
    assert label_clashes(["hidden node $k$"], "components 0-3 of v") == []      # the label names its meaning


@pytest.mark.parametrize("sentence", [
    "The attention reads $\\mathbf z/T$ at temperature $T=3$.",
    "A trainable top layer $A$ with 4 classes.",
    "The residual component $b$ acts as a bias.",
    "Take latent levels $0,\\dots,K-1$.",
    "Take clusters with standard deviation $\\sigma$.",
    "The ratio of component $j$ to component $k$.",
])
def test_the_check_catches_each_old_meaning(sentence: str) -> None:
    assert clashes(sentence), sentence


@pytest.mark.parametrize("sentence", [
    "Contextual tokens $x_1,\\dots,x_{T-1}$ precede the query.",
    "The temperature $\\tau$ divides the logits, and $\\mathbf v^\\top\\mathbf x$ is a bias-free product.",
    "The normaliser is $A=1$ for exp attention.",
])
def test_the_check_lets_the_one_meaning_pass(sentence: str) -> None:
    assert clashes(sentence) == []


def test_the_symbol_table_lists_every_reserved_symbol_with_its_meaning() -> None:
    table = (BOOK / SYMBOL_TABLE).read_text()
    terms = re.findall(r"^(\S[^\n]*)\n  ", table, flags=re.M)  # glossary terms: a line followed by an indented one
    plain = {"\\sigma": "σ"}
    for symbol, (meaning, _) in RESERVED.items():
        name = plain.get(symbol, symbol)
        assert any(re.search(r"(^|[\s,(])" + re.escape(name) + r"($|[\s,(])", term) for term in terms), symbol
        assert meaning.split()[-1] in table.lower(), meaning
