"""Code without a model: arithmetic, one tool call whose arguments are in the request, and
listings of tools and workspace files. Anything else is refused with how to configure a model."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..catalog import ToolSpec
from ..errors import GenerationError
from . import HOW_TO_CONFIGURE, GeneratedCode, TokenCallback
from .prompt import PromptContext

_WORDS = [
    (r"\bto the power of\b", "**"),
    (r"\bmultiplied by\b", "*"),
    (r"\bdivided by\b", "/"),
    (r"\btimes\b", "*"),
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
    (r"\bmod(?:ulo)?\b", "%"),
]
_ARITHMETIC = re.compile(r"[\d.()\s+\-*/^%×÷]+")
_OPERATOR = re.compile(r"\d\s*(\*\*|[+\-*/^%×÷])\s*[\d(.]")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_QUOTED = re.compile(r"\"([^\"]*)\"|'([^']*)'")
_KEYWORD = re.compile(r"\b([A-Za-z_]\w*)\s*[=:]\s*(\"[^\"]*\"|'[^']*'|[^\s,;]+)")
_LIST_TOOLS = re.compile(r"\b(list|show|what|which)\b.*\btools?\b", re.I)
_LIST_FILES = re.compile(r"\b(list|show|what|which)\b.*\b(files?|workspace)\b", re.I)
_NUMERIC_TYPES = {"int", "float", "complex", "Decimal"}
_MAX_LISTED = 200

CAPABILITIES = (
    'Without a model, cemcp handles arithmetic ("Calculate 5 + 3"), a single tool call whose '
    'arguments are in the request ("add 5 and 3", "get_current_time timezone=\'UTC\'"), and '
    "listing tools or workspace files."
)


class RuleGenerator:
    name = "rules"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def generate(
        self, context: PromptContext, on_token: TokenCallback | None = None
    ) -> GeneratedCode:
        rules: list[Callable[[PromptContext], GeneratedCode | None]] = [
            _arithmetic,
            _list_tools,
            _list_files,
            _single_call,
        ]
        for rule in rules:
            generated = rule(context)
            if generated is not None:
                if on_token is not None:
                    on_token(generated.code)
                return generated
        raise GenerationError(
            f"No model is configured, and the rule-based generator cannot handle "
            f"{context.request.strip()!r}. {CAPABILITIES}\n{HOW_TO_CONFIGURE}"
        )


def _code(code: str, tools: list[ToolSpec] | None = None) -> GeneratedCode:
    return GeneratedCode(code=code, generator="rules", tools_used=[t.qualname for t in tools or []])


def _arithmetic(context: PromptContext) -> GeneratedCode | None:
    text = context.request
    for pattern, symbol in _WORDS:
        text = re.sub(pattern, f" {symbol} ", text, flags=re.I)
    candidates = [m.group().strip() for m in _ARITHMETIC.finditer(text)]
    candidates = [c for c in candidates if _OPERATOR.search(c) and _balanced(c)]
    if not candidates:
        return None
    expression = " ".join(max(candidates, key=len).split())
    known = context.tools + context.all_tools
    calculate = next((t for t in known if t.qualname == "calculator.calculate"), None)
    if calculate is None:
        python = expression.replace("^", "**").replace("×", "*").replace("÷", "/")
        return _code(f"{python}\n")
    return _code(f"{calculate.import_line}\n\ncalculate({expression!r})\n", [calculate])


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _list_tools(context: PromptContext) -> GeneratedCode | None:
    if not _LIST_TOOLS.search(context.request) or _LIST_FILES.search(context.request):
        return None
    tools = context.all_tools[:_MAX_LISTED]
    rows = ",\n".join(
        f"    {{'tool': {t.qualname!r}, 'call': {t.import_line!r}, 'description': {t.summary!r}}}"
        for t in tools
    )
    return _code(f"tools = [\n{rows},\n]\ntools\n")


def _list_files(context: PromptContext) -> GeneratedCode | None:
    if not _LIST_FILES.search(context.request):
        return None
    code = (
        "from pathlib import Path\n\n"
        "files = [\n"
        "    {'file': str(p.relative_to('/workspace')), 'bytes': p.stat().st_size}\n"
        "    for p in sorted(Path('/workspace').rglob('*'))\n"
        "    if p.is_file()\n"
        "]\n"
        "files\n"
    )
    return _code(code)


def _single_call(context: PromptContext) -> GeneratedCode | None:
    """The best-ranked tool whose required arguments the request supplies, using all of them."""
    request = context.request
    keywords = {m.group(1): _literal(m.group(2)) for m in _KEYWORD.finditer(request)}
    rest = _KEYWORD.sub(" ", request)
    strings = [a if a is not None else b for a, b in _QUOTED.findall(rest)]
    numbers = [_literal(n) for n in _NUMBER.findall(_QUOTED.sub(" ", rest))]
    for tool in context.tools:
        call = _bind(tool, dict(keywords), list(strings), list(numbers))
        if call is not None:
            return _code(f"{tool.import_line}\n\n{call}\n", [tool])
    return None


def _bind(
    tool: ToolSpec, keywords: dict[str, object], strings: list[object], numbers: list[object]
) -> str | None:
    names = {p.name for p in tool.params}
    if set(keywords) - names:
        return None
    args: list[str] = []
    for param in tool.params:
        if param.name in keywords:
            args.append(f"{param.name}={keywords.pop(param.name)!r}")
            continue
        numeric = (param.annotation or "").split("|")[0].strip() in _NUMERIC_TYPES
        pool = numbers if numeric else strings
        if pool:
            args.append(f"{param.name}={pool.pop(0)!r}")
        elif param.required:
            return None
    if strings or numbers or not args:
        return None
    return f"{tool.name}({', '.join(args)})"


def _literal(text: str) -> object:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
