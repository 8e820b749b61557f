"""Display classes: each has ``_repr_mimebundle_`` with a plain-text form for nbval and for
frontends without widgets, HTML for notebooks, and provenance metadata under ``cemcp``.

Errors are exceptions with ``_render_traceback_``: IPython shows exactly the sandbox's
traceback (or cemcp's message) and marks the cell as failed, so "Run all" stops there.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cemcp_kernel.sandbox.results import ErrorInfo, Value

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
    """The value of the code's last expression: JSON as a collapsible tree, an image, or text.
    Tables are :class:`magics.views.TableView` (see :func:`result_view`)."""

    def __init__(self, value: Value, provenance: dict[str, Any] | None = None) -> None:
        self.value = value
        self.provenance = provenance or {}

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Bundle:
        value = self.value
        data: dict[str, Any] = {"text/plain": value.repr}
        if value.png is not None:
            data["image/png"] = value.png
        elif value.is_json and isinstance(value.data, (dict, list)) and value.data:
            from .views import tree_html

            data["text/html"] = tree_html(value.data)
        return data, {"cemcp": {"kind": "result", "type": value.type, **self.provenance}}


def result_view(value: Value, provenance: dict[str, Any] | None = None) -> Any:
    """The display object for a value: a table widget for tables, :class:`Result` otherwise."""
    if value.table is not None:
        from .views import TableView

        return TableView(value.table)
    return Result(value, provenance)


class Figure:
    """A figure the code drew in the sandbox."""

    def __init__(self, png: str) -> None:
        self.png = png

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Bundle:
        return {"image/png": self.png, "text/plain": "<figure>"}, {"cemcp": {"kind": "figure"}}


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
