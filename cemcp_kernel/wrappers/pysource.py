"""Python source text laid out the way ``ruff format`` lays it out, so generated files are
formatted as written and a formatter run changes nothing.

The rule used throughout: a bracketed construct stays on one line when it fits; otherwise every
element goes on its own line with a trailing comma (the "magic trailing comma" keeps it so).
"""

from __future__ import annotations

import builtins
import keyword
import re
import textwrap
from collections.abc import Sequence
from typing import Any

WIDTH = 100
MAX_NAME = 60  # longer tool or parameter names are cut (OpenAI-style clients allow 64)
INDENT = "    "
_NOT_WORD = re.compile(r"[^0-9A-Za-z_]+")


def string(text: str) -> str:
    """A str literal, double-quoted unless that needs more escapes than single quotes."""
    quote = '"' if text.count('"') <= text.count("'") else "'"
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == quote:
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif not char.isprintable():
            code = ord(char)
            out.append(
                f"\\x{code:02x}"
                if code < 0x100
                else f"\\u{code:04x}"
                if code < 0x10000
                else f"\\U{code:08x}"
            )
        else:
            out.append(char)
    return quote + "".join(out) + quote


def flat(value: Any) -> str:
    """A JSON value as a one-line Python literal."""
    if isinstance(value, str):
        return string(value)
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{string(str(k))}: {flat(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(flat(v) for v in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def literal(value: Any, indent: int, used: int, tail: int = 0) -> str:
    """``value`` as a literal starting at column ``used`` of a line indented ``indent`` levels,
    followed by ``tail`` more characters on its last line."""
    one_line = flat(value)
    if (
        used + len(one_line) + tail <= WIDTH
        or not isinstance(value, dict | list | tuple)
        or not value
    ):
        return one_line
    inner = INDENT * (indent + 1)
    lines = []
    if isinstance(value, dict):
        open_, close = "{", "}"
        for key, item in value.items():
            head = f"{string(str(key))}: "
            lines.append(inner + head + literal(item, indent + 1, len(inner) + len(head), 1) + ",")
    else:
        open_, close = "[", "]"
        for item in value:
            lines.append(inner + literal(item, indent + 1, len(inner), 1) + ",")
    return open_ + "\n" + "\n".join(lines) + "\n" + INDENT * indent + close


def bracketed(head: str, items: Sequence[str], tail: str, indent: int) -> str:
    """``head(items)tail`` on one line if it fits, else one item per line with a trailing comma.

    ``head`` includes the opening bracket and ``tail`` the closing one.
    """
    prefix = INDENT * indent
    one_line = prefix + head + ", ".join(items) + tail
    if len(one_line) <= WIDTH or not items:
        return one_line
    inner = INDENT * (indent + 1)
    body = "\n".join(f"{inner}{item}," for item in items)
    return f"{prefix}{head}\n{body}\n{prefix}{tail}"


def docstring(text: str, indent: int) -> str:
    """A triple-quoted docstring, wrapped, its closing quotes on their own line."""
    prefix = INDENT * indent
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = text.strip("\n").split("\n")
    if len(lines) == 1:  # ruff keeps a one-line docstring on one line, however long
        line = lines[0].strip()
        return prefix + '"""' + line + (' """' if line.endswith('"') else '"""')
    body = [(prefix + line).rstrip() if line.strip() else "" for line in lines]
    body[0] = prefix + '"""' + lines[0].strip()
    return "\n".join(body) + "\n" + prefix + '"""'


def paragraphs(text: str, width: int, indent: str = "", hang: str | None = None) -> list[str]:
    """Text wrapped to ``width`` per paragraph, blank lines between paragraphs kept.

    The very first line starts with ``indent``, every other line with ``hang``. Lines that look
    laid out (lists, tables, code) are kept as they are.
    """
    hang = indent if hang is None else hang
    out: list[str] = []
    lead = indent
    for block in re.split(r"\n\s*\n", clean_text(text)):
        lines = [line.rstrip() for line in block.split("\n") if line.strip()]
        if not lines:
            continue
        if out:
            out.append("")
        laid_out = any(re.match(r"\s*([-*•|>#]|\d+[.)]\s|```)", line) for line in lines)
        if laid_out or (len(lines) > 1 and all(len(line) < 60 for line in lines)):
            for line in lines:
                out.append(lead + line.strip())
                lead = hang
            continue
        joined = " ".join(line.strip() for line in lines)
        out += textwrap.wrap(
            joined,
            width=width,
            initial_indent=lead,
            subsequent_indent=hang,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [lead]
        lead = hang
    return out


def clean_text(text: str, limit: int = 4000) -> str:
    """Server-supplied text made safe for a docstring or comment: no control characters, tabs
    expanded, bounded length."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(4)
    text = "".join(c for c in text if c == "\n" or c.isprintable())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text.strip()


def identifier(name: str, taken: set[str], *, avoid_builtins: bool = True) -> str:
    """A valid, public, unused Python name for ``name`` (dashes, dots, keywords, digits...)."""
    base = _NOT_WORD.sub("_", name).strip("_")
    base = re.sub(r"_+", "_", base)[:MAX_NAME].rstrip("_") or "tool"
    if base[0].isdigit():
        base = f"n{base}"
    if (
        keyword.iskeyword(base)
        or keyword.issoftkeyword(base)
        or (avoid_builtins and base in _BUILTINS)
        or base in _AMBIGUOUS
    ):
        base += "_"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    return candidate


def class_name(name: str, taken: set[str]) -> str:
    """A PascalCase, unused class name made from a title or a field name."""
    words = [w for w in re.split(r"[^0-9A-Za-z]+", name) if w]
    base = "".join(w[0].upper() + w[1:] for w in words) or "Record"
    if base[0].isdigit():
        base = f"T{base}"
    candidate, n = base, 2
    while candidate in taken or keyword.iskeyword(candidate):
        candidate, n = f"{base}{n}", n + 1
    return candidate


_BUILTINS = set(dir(builtins))
_AMBIGUOUS = {"l", "I", "O"}  # pycodestyle E741


def all_order(name: str) -> tuple[int, list[Any]]:
    """How ruff sorts ``__all__`` (RUF022): CONSTANTS, then Classes, then the rest, naturally."""
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    return kind, natural(name, fold=False)


def natural(name: str, fold: bool = True) -> list[Any]:
    """Sort key that orders ``tool_2`` before ``tool_10`` (isort folds case, RUF022 does not)."""
    parts = re.split(r"(\d+)", name.lower() if fold else name)
    return [int(part) if part.isdigit() else part for part in parts]


def literal_assignment(head: str, value: Any) -> str:
    """``head`` followed by ``value`` as a literal, laid out for a top-level statement."""
    return head + literal(value, 0, len(head))
