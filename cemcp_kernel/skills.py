"""Skills: approved code kept as a reusable, importable function.

``skills/<name>/SKILL.md`` holds front matter (name, description) and how to use it;
``skills/<name>/__init__.py`` holds the code as a function named like the skill, its imports at
module level and its last expression returned. The catalog finds it like a tool, the prompt
offers it, and the sandbox imports it: ``from skills.<name> import <name>``.
"""

from __future__ import annotations

import ast
import keyword
from pathlib import Path

from .errors import CemcpError


class SkillError(CemcpError):
    """A skill cannot be saved as asked."""


def skill_source(name: str, code: str, description: str) -> str:
    """The module text: imports first, then ``def <name>():`` returning the last expression
    (``async def`` when the code awaits). It is compiled before anyone writes it."""
    try:
        flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(code, "<skill>", "exec", flags, dont_inherit=True)
    except SyntaxError as exc:
        raise SkillError(f"The code does not parse (line {exc.lineno}: {exc.msg}).") from None
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    body = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    if body and isinstance(body[-1], ast.Expr):
        body[-1] = ast.Return(value=body[-1].value)
    lines = (description.strip() or f"The {name} skill.").splitlines()
    text = lines[0] + "".join(f"\n    {line}".rstrip() for line in lines[1:])
    doc = ast.Expr(value=ast.Constant(text + ("\n    " if len(lines) > 1 else "")))
    awaits = any(isinstance(n, (ast.Await, ast.AsyncFor, ast.AsyncWith)) for n in ast.walk(tree))
    kind = ast.AsyncFunctionDef if awaits else ast.FunctionDef
    function = kind(
        name=name,
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[doc, *(body or [ast.Pass()])],
        decorator_list=[],
        returns=None,
    )
    if "type_params" in kind._fields:  # Python 3.12+
        function.type_params = []
    ast.fix_missing_locations(function)
    header = ast.Module(
        body=[ast.Expr(ast.Constant(f"Skill {name}: {_first_line(description)}"))], type_ignores=[]
    )
    head = "".join(ast.unparse(node) + "\n" for node in imports)
    source = f"{ast.unparse(header)}\n\n{head}\n\n{ast.unparse(function)}\n"
    try:
        compile(source, f"skills/{name}/__init__.py", "exec")
    except SyntaxError as exc:  # a bug here, but never write a skill that cannot be imported
        raise SkillError(f"The skill's module would not compile: {exc.msg}.") from None
    return source


def skill_readme(name: str, description: str, request: str, code: str, is_async: bool) -> str:
    summary = _first_line(description)
    call = f"await {name}()" if is_async else f"{name}()"
    return (
        f"---\nname: {name}\ndescription: {summary}\n---\n\n"
        f"# {name}\n\n{description.strip()}\n\n"
        f"## How to use it\n\nIn a `%%mcp` cell, or in code run in the sandbox:\n\n"
        f"```python\nfrom skills.{name} import {name}\n\nresult = {call}\n```\n\n"
        + (f"## Where it came from\n\nRequest: {request.strip()}\n\n" if request.strip() else "")
        + f"```python\n{code.strip()}\n```\n"
    )


def check_name(name: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise SkillError(
            f"{name!r} is not a usable skill name: use letters, digits and underscores, "
            "starting with a letter."
        )


def save_skill(
    skills_dir: Path, name: str, code: str, description: str, request: str = "", force: bool = False
) -> Path:
    """Write the skill's folder; refuses to overwrite unless ``force``."""
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise SkillError(
            f"{name!r} is not a usable skill name: use letters, digits and underscores."
        )
    folder = skills_dir / name
    if folder.exists() and not force:
        raise SkillError(
            f"A skill named {name!r} exists already ({folder}); pass --force to replace it."
        )
    source = skill_source(name, code, description or request)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(source)
    is_async = f"async def {name}(" in source
    readme = skill_readme(name, description or request, request, code, is_async)
    (folder / "SKILL.md").write_text(readme)
    return folder


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""
