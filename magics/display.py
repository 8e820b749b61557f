"""Display classes: each has ``_repr_mimebundle_`` with a plain-text form for nbval and for
frontends without widgets, HTML for notebooks, and provenance metadata under ``cemcp``.

Errors are exceptions with ``_render_traceback_``: IPython shows exactly the sandbox's
traceback (or cemcp's message) and marks the cell as failed, so "Run all" stops there.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cemcp_kernel.sandbox.results import ErrorInfo, Value

MAX_TABLE_ROWS = 50
Bundle = tuple[dict[str, Any], dict[str, Any]]


class Code:
    """Generated code, highlighted."""

    def __init__(
        self, code: str, caption: str = "", provenance: dict[str, Any] | None = None
    ) -> None:
        self.code = code
        self.caption = caption
        self.provenance = provenance or {}

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Bundle:
        caption = (
            f"<div style='color:#666;font-size:85%'>{html.escape(self.caption)}</div>"
            if self.caption
            else ""
        )
        text = f"# {self.caption}\n{self.code}" if self.caption else self.code
        return (
            {"text/plain": text.rstrip("\n"), "text/html": caption + highlight_html(self.code)},
            {"cemcp": {"kind": "code", **self.provenance}},
        )


def highlight_html(code: str) -> str:
    """Python highlighted with inline styles (no stylesheet needed, stable for nbval)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    body = highlight(code, PythonLexer(), HtmlFormatter(noclasses=True, nowrap=True))
    return f"<pre style='margin:0'>{body}</pre>"


class Notice:
    """A remark of cemcp's own (output capped, sandbox replaced, code not run)."""

    def __init__(self, text: str, level: str = "info") -> None:
        self.text = text
        self.level = level

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Bundle:
        color = {"info": "#31708f", "warn": "#8a6d3b", "error": "#a94442"}[self.level]
        return (
            {
                "text/plain": f"[cemcp] {self.text}",
                "text/html": f"<div style='color:{color}'>[cemcp] {html.escape(self.text)}</div>",
            },
            {"cemcp": {"kind": "notice", "level": self.level}},
        )


class Result:
    """The value of the code's last expression: a table for records, JSON for plain data."""

    def __init__(self, value: Value, provenance: dict[str, Any] | None = None) -> None:
        self.value = value
        self.provenance = provenance or {}

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Bundle:
        data: dict[str, Any] = {"text/plain": self.value.repr}
        rows = self.value.data if self.value.is_json else None
        if _is_records(rows):
            data["text/html"] = records_html(rows)
        elif self.value.is_json and isinstance(rows, (dict, list)):
            data["application/json"] = rows if isinstance(rows, dict) else {"items": rows}
        return data, {"cemcp": {"kind": "result", "type": self.value.type, **self.provenance}}


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(row, dict) for row in value)


def records_html(rows: list[dict[str, Any]]) -> str:
    columns: list[str] = []
    for row in rows[:MAX_TABLE_ROWS]:
        columns += [c for c in row if c not in columns]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(row.get(c)))}</td>" for c in columns) + "</tr>"
        for row in rows[:MAX_TABLE_ROWS]
    )
    more = (
        f"<caption style='caption-side:bottom'>first {MAX_TABLE_ROWS} of {len(rows)} rows</caption>"
        if len(rows) > MAX_TABLE_ROWS
        else ""
    )
    return f"<table>{more}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class SandboxCodeError(Exception):
    """The code raised inside the sandbox (or the sandbox stopped it); shown as its traceback."""

    def __init__(self, error: ErrorInfo) -> None:
        super().__init__(f"{error.ename}: {error.evalue}")
        self.error = error

    def _render_traceback_(self) -> list[str]:
        error = self.error
        if error.kind == "interrupted" and error.traceback:
            return [*error.traceback.rstrip("\n").splitlines()[:-1], "KeyboardInterrupt"]
        if error.kind != "user" or not error.traceback:
            return [f"{error.ename}: {error.evalue}" if error.evalue else error.ename]
        return error.traceback.rstrip("\n").splitlines()


class CemcpMessage(Exception):
    """A cemcp error with a message the user can act on; shown without a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [
            f"cemcp: {line}" if i == 0 else line for i, line in enumerate(str(self).splitlines())
        ]
