"""One meaning per symbol (book/symbols.md): no page gives a reserved symbol one of its old meanings again.

A text search cannot read mathematics, so the check is a heuristic: in the prose of every page (code cells
removed), a math span that uses a reserved symbol as a token must not stand in the same sentence as, and within
a few words of, a word naming one of the meanings the symbol table took away from it ("temperature" near $T$,
"top layer" near $A$, ...). The symbol table itself is the only page that may mention them together.
"""

from __future__ import annotations

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


def teaching_pages() -> list[str]:
    return sorted(p.name for p in BOOK.glob("*.md") if p.name not in NOT_TEACHING)


@pytest.mark.parametrize("page", teaching_pages())
def test_no_reserved_symbol_takes_an_old_meaning(page: str) -> None:
    assert clashes((BOOK / page).read_text()) == []


@pytest.mark.parametrize("sentence", [
    "The attention reads $\\mathbf z/T$ at temperature $T=3$.",
    "A trainable top layer $A$ with 4 classes.",
    "The residual component $b$ acts as a bias.",
    "Take latent levels $0,\\dots,K-1$.",
    "Take clusters with standard deviation $\\sigma$.",
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
