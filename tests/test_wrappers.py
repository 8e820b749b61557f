"""Wrapper generation from JSON Schema: names, signatures, formatting, and the argument checks
the generated code makes inside the sandbox before anything reaches the host."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cemcp_kernel.catalog import Discovery
from cemcp_kernel.config import load_settings
from cemcp_kernel.engine import Engine
from cemcp_kernel.wrappers.render import ToolInfo, function_names, render_server

from .conftest import ROOT

NODE = {
    "type": "object",
    "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
    },
    "required": ["value"],
}
SEARCH = ToolInfo(
    name="search.v2",
    title="Search",
    description='Find "things".\n\nQuoting: """ and a back\\slash, tabs\tand ünïcödé.',
    input_schema={
        "type": "object",
        "properties": {
            "from": {"type": "string", "description": "Where to start."},
            "2fa-code": {"type": "integer", "minimum": 0},
            "filter": {
                "type": "object",
                "title": "Filter Spec",
                "properties": {"field": {"type": "string"}, "op": {"enum": ["eq", "ne"]}},
                "required": ["field"],
                "additionalProperties": False,
            },
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
            "node": {"$ref": "#/$defs/Node"},
            "mode": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            "limit": {"type": "integer", "default": 10},
            "options": {"type": "object", "default": {"deep": True}},
            "l": {"type": "boolean"},
            "call_tool": {"type": "string"},
        },
        "required": ["from", "2fa-code", "filter"],
        "$defs": {"Node": NODE},
    },
    output_schema={
        "type": "object",
        "properties": {"hits": {"type": "array", "items": {"$ref": "#/$defs/Hit"}}},
        "required": ["hits"],
        "$defs": {"Hit": {"type": "object", "properties": {"id": {"type": "string"}}}},
        "description": "What was found.",
    },
    read_only=True,
)
TOOLS = [
    SEARCH,
    ToolInfo(name="class", description="A keyword."),
    ToolInfo(name="class_", description="Collides with the keyword once cleaned."),
    ToolInfo(name="list", description="A builtin."),
    ToolInfo(name="9lives", description="A leading digit."),
    ToolInfo(name="__init__", description="Underscores."),
    ToolInfo(name="ping", description="Has an async twin."),
    ToolInfo(name="ping_async", description="Named like the twin."),
]


def _write(tmp_path: Path) -> Path:
    folder = tmp_path / "servers" / "odd"
    folder.mkdir(parents=True)
    for name, text in render_server("odd", TOOLS, "odd 1.0").items():
        (folder / name).write_text(text)
    return folder


def test_names_from_any_tool_name_are_valid_unique_and_stable() -> None:
    names = function_names(TOOLS)
    assert names == {
        "9lives": "n9lives",
        "__init__": "init",
        "class": "class_",
        "class_": "class__2",
        "list": "list_",
        "ping": "ping",
        "ping_async": "ping_async_2",
        "search.v2": "search_v2",
    }
    assert function_names(list(reversed(TOOLS))) == names


def test_generated_code_is_deterministic_formatted_and_lint_clean(tmp_path: Path) -> None:
    assert render_server("odd", TOOLS, "odd 1.0") == render_server("odd", TOOLS, "odd 1.0")
    folder = _write(tmp_path)
    for command in (["format", "--check"], ["check"]):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                *command,
                "--config",
                str(ROOT / "pyproject.toml"),
                str(folder),
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_signatures_follow_the_json_schema(tmp_path: Path) -> None:
    _write(tmp_path)
    catalog = Discovery().discover(tmp_path / "servers", None)
    assert sorted(t.name for t in catalog.tools) == [
        "class_", "class__2", "init", "list_", "n9lives", "ping", "ping_async_2", "search_v2",
    ]  # fmt: skip
    search = catalog.get("odd.search_v2")
    assert search is not None
    assert search.signature == (
        "def search_v2(from_: str, n2fa_code: int, filter: FilterSpec, *, "
        "tags: list[str] | None=None, meta: dict[str, int] | None=None, node: Node | None=None, "
        "mode: str | int | None=None, limit: int=10, options: dict[str, Any] | None=None, "
        "l_: bool | None=None, call_tool_2: str | None=None) -> SearchV2Result"
    )
    assert search.description.startswith('Search\n\nFind "things".')
    assert "from_: Where to start." in search.description
    assert "Awaitable variant: ``await search_v2_async(...)``." in search.description
    source = (tmp_path / "servers" / "odd" / "search_v2.py").read_text()
    for declaration in (
        "class FilterSpec(_FilterSpecRequired, total=False):",
        "class Node(_NodeRequired, total=False):\n    children: list[Node]",
        "class SearchV2Result(TypedDict):",
        "class Hit(TypedDict, total=False):",
        '"call_tool": call_tool_2',
    ):
        assert declaration in source


@pytest.fixture
def odd_engine(tmp_path: Path, workspace: Path) -> Any:
    _write(tmp_path)
    settings = load_settings(
        ROOT,
        servers_dir=str(tmp_path / "servers"),
        workspace_dir=str(workspace),
        sandbox__pool_size=1,
    )
    with Engine(settings) as engine:
        yield engine


def test_wrappers_check_arguments_in_the_sandbox_before_calling(odd_engine: Engine) -> None:
    refused = {
        "search_v2('a', -1, {'field': 'x'})": "argument '2fa-code' must be at least 0, got -1",
        "search_v2('a', 1, {'op': 'eq'})": "argument 'filter.field' is required",
        "search_v2('a', 1, {'field': 'x', 'op': 'gt'})": "argument 'filter.op' must be one of 'eq', 'ne'",
        "search_v2('a', 1, {'field': 'x', 'extra': 1})": "argument 'filter.extra' is not a parameter",
        "search_v2('a', 1, {'field': 'x'}, tags=['a', 'b', 'c', 'd'])": "must have at most 3 items",
        "search_v2('a', 1, {'field': 'x'}, meta={'k': 'v'})": "argument 'meta.k' must be int",
        "search_v2('a', 1, {'field': 'x'}, node={'value': 1, 'children': [{}]})": "argument 'node.children[0].value' is required",
        "search_v2('a', 1, {'field': 'x'}, mode=1.5)": "argument 'mode' must be str",
        "search_v2('a', True, {'field': 'x'})": "argument '2fa-code' must be int, got bool True",
    }
    for code, message in refused.items():
        result = odd_engine.execute(f"from servers.odd import search_v2\n{code}")
        assert result.error is not None and result.error.ename == "ToolArgumentError", code
        assert message in result.error.evalue, (code, result.error.evalue)
        assert result.tool_calls == [], code
    accepted = odd_engine.execute(
        "from servers.odd import search_v2\n"
        "search_v2('a', 1, {'field': 'x'}, node={'value': 1, 'children': [{'value': 2}]})"
    )
    # Valid arguments leave the sandbox; this server has no server.json, as the host says.
    assert accepted.error is not None and "servers/odd has no server.json" in accepted.error.evalue
    assert [c.tool for c in accepted.tool_calls] == ["search.v2"]
