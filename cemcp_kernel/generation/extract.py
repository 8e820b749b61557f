"""Taking code out of a model's reply and checking it against the tools that were disclosed."""

from __future__ import annotations

import ast
import re

from ..catalog import ToolSpec

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)
_CODE_LANGUAGES = {"", "python", "py", "python3"}


def extract_code(reply: str) -> str:
    """The Python in a reply: its fenced python blocks joined, else the whole reply."""
    blocks = [body for lang, body in _FENCE.findall(reply) if lang.lower() in _CODE_LANGUAGES]
    code = "\n\n".join(block.strip("\n") for block in blocks) if blocks else reply
    return code.strip() + "\n" if code.strip() else ""


def check_code(code: str, disclosed: list[ToolSpec]) -> tuple[list[str], list[str]]:
    """(qualnames of the tools the code imports, problems that need a repair round)."""
    if not code.strip():
        return [], ["The reply contained no code."]
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [], [f"The code does not parse: {exc.msg} (line {exc.lineno})."]
    known = {(t.module, t.name): t for t in disclosed}
    modules = {t.module for t in disclosed}
    used: list[str] = []
    problems: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _is_tool_module(node.module):
            for alias in node.names:
                tool = known.get((node.module, alias.name))
                if tool is None and f"{node.module}.{alias.name}" in modules:
                    tool = next(t for t in disclosed if t.module == f"{node.module}.{alias.name}")
                if tool is None:
                    problems.append(
                        f"`from {node.module} import {alias.name}` is not one of the tools given."
                    )
                elif tool.qualname not in used:
                    used.append(tool.qualname)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not _is_tool_module(alias.name):
                    continue
                matches = [t for t in disclosed if t.module == alias.name]
                if not matches:
                    problems.append(f"`import {alias.name}` is not one of the tools given.")
                used += [t.qualname for t in matches if t.qualname not in used]
    return used, problems


def _is_tool_module(module: str) -> bool:
    return module.split(".")[0] in ("servers", "skills")
