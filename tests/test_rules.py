from __future__ import annotations

import asyncio

import pytest

from cemcp_kernel.catalog import Discovery
from cemcp_kernel.errors import GenerationError
from cemcp_kernel.generation.prompt import PromptContext
from cemcp_kernel.generation.rules import RuleGenerator
from cemcp_kernel.selection import Selector

from .conftest import ROOT

CATALOG = Discovery().discover(ROOT / "servers", ROOT / "skills")


def generate(request: str) -> str:
    tools = [s.tool for s in Selector(CATALOG).search(request)]
    context = PromptContext(request=request, tools=tools, all_tools=CATALOG.tools)
    return asyncio.run(RuleGenerator().generate(context)).code


@pytest.mark.parametrize(
    ("request_text", "call"),
    [
        ("Calculate 5 + 3", "calculate('5 + 3')"),
        ("What is (2 + 3) * 4?", "calculate('(2 + 3) * 4')"),
        ("compute 7 times 6 plus 1", "calculate('7 * 6 + 1')"),
        ("add 5 and 3", "add(a=5, b=3)"),
        ("multiply 2.5 by 4", "multiply(a=2.5, b=4)"),
        ("add a=5 b=3", "add(a=5, b=3)"),
        ("multiply b=2 a='x'", "multiply(a='x', b=2)"),
    ],
)
def test_simple_requests(request_text: str, call: str) -> None:
    assert call in generate(request_text)


def test_listings() -> None:
    assert "calculator.add" in generate("list the available tools")
    assert "Path('/workspace')" in generate("which files are in the workspace?")


def test_refusal_explains_how_to_configure_a_model() -> None:
    with pytest.raises(GenerationError) as info:
        generate("write me a poem about the sea")
    assert "OPENAI_API_KEY" in str(info.value) and "arithmetic" in str(info.value)
