"""Keyword selection (BM25), always available; hybrid selection is in test_semantic.py."""

from __future__ import annotations

import pytest

from cemcp_kernel.catalog import Discovery
from cemcp_kernel.errors import SelectionError
from cemcp_kernel.selection import BM25, Selector, tokenize

from .conftest import ROOT


def test_tokenize_splits_identifiers_and_stems() -> None:
    assert tokenize("getWeather for new_york", stemmed=False) == [
        "weather",
        "getweather",
        "new",
        "york",
    ]
    assert tokenize("PDFReport files running") == ["pdf", "report", "pdfreport", "file", "run"]
    assert "the" not in tokenize("the sum")


def test_bm25_prefers_rare_terms_and_ignores_unknown_ones() -> None:
    index = BM25([["weather", "forecast"], ["weather", "alert"], ["stock", "price"]])
    scores = index.scores(["forecast", "weather", "zebra"])
    assert set(scores) == {0, 1}
    assert scores[0] > scores[1] > 0
    assert index.scores(["zebra"]) == {}


def test_request_words_pick_the_tool() -> None:
    selector = Selector(Discovery().discover(ROOT / "servers", ROOT / "skills"))
    assert selector.mode == "keyword (BM25)"
    assert selector.search("multiply two numbers")[0].tool.qualname == "calculator.multiply"
    assert selector.search("add numbers together")[0].tool.qualname == "calculator.add"
    assert selector.search("adding the numbers")[0].tool.qualname == "calculator.add"
    assert selector.search("completely unrelated zebra") == []


def test_explicit_tools_override_and_unknown_ones_are_named() -> None:
    selector = Selector(Discovery().discover(ROOT / "servers", ROOT / "skills"))
    assert [s.tool.qualname for s in selector.pick(["calculator.add"])] == ["calculator.add"]
    with pytest.raises(SelectionError, match=r"nope\.tool"):
        selector.pick(["nope.tool"])


def test_skills_are_searchable_next_to_tools(tmp_path) -> None:
    skill = tmp_path / "skills" / "quarterly_report"
    skill.mkdir(parents=True)
    (skill / "__init__.py").write_text(
        "def quarterly_report(year: int, quarter: int) -> str:\n"
        '    """Build the revenue report of one quarter as Markdown."""\n'
    )
    selector = Selector(Discovery().discover(ROOT / "servers", tmp_path / "skills"))
    best = selector.search("write the revenue report for the second quarter")[0].tool
    assert (best.kind, best.import_line) == (
        "skill",
        "from skills.quarterly_report import quarterly_report",
    )
