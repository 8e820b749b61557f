from __future__ import annotations

import pytest

from cemcp_kernel.catalog import Discovery
from cemcp_kernel.errors import SelectionError
from cemcp_kernel.selection import Selector, tokenize

from .conftest import ROOT


def test_tokenize_splits_identifiers() -> None:
    assert tokenize("getWeather for new_york") == ["weather", "getweather", "new", "york"]
    assert "the" not in tokenize("the sum")


def test_request_words_pick_the_tool() -> None:
    selector = Selector(Discovery().discover(ROOT / "servers", ROOT / "skills"))
    assert selector.search("multiply two numbers")[0].tool.qualname == "calculator.multiply"
    assert selector.search("add numbers together")[0].tool.qualname == "calculator.add"
    assert selector.search("completely unrelated zebra") == []


def test_explicit_tools_override_and_unknown_ones_are_named() -> None:
    selector = Selector(Discovery().discover(ROOT / "servers", ROOT / "skills"))
    assert [s.tool.qualname for s in selector.pick(["calculator.add"])] == ["calculator.add"]
    with pytest.raises(SelectionError, match=r"nope\.tool"):
        selector.pick(["nope.tool"])
