"""Results as widgets, each with a plain-text form for nbval and frontends without widgets.

A table is sortable and paged in the browser; only the rows that crossed from the sandbox are
here (at most the agent's cap), and the caption says when more stay in the sandbox.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cemcp_kernel.sandbox.results import Table

PAGE_ROWS = 20
TEXT_ROWS = 10
TREE_ITEMS = 200


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def table_text(table: Table, rows: int = TEXT_ROWS) -> str:
    """A fixed-width text table of the first rows, with the row count."""
    shown = [[_cell(v) for v in row] for row in table.rows[:rows]]
    widths = [
        min(30, max([len(c), *(len(r[i]) for r in shown)])) for i, c in enumerate(table.columns)
    ]

    def line(cells: list[str]) -> str:
        return "  ".join(c[:w].ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()

    lines = [line(table.columns), line(["-" * w for w in widths])]
    lines += [line(r) for r in shown]
    lines.append(f"[{table.total:,} rows × {len(table.columns)} columns]")
    return "\n".join(lines)


def table_html(columns: list[str], rows: list[list[Any]], caption: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    cap = f"<caption style='caption-side:bottom;color:#666'>{html.escape(caption)}</caption>"
    return f"<table class='cemcp-table'>{cap if caption else ''}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (2, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))


class TableView:
    """A sortable, paged table widget over the rows that reached the host."""

    def __init__(self, table: Table) -> None:
        import ipywidgets as widgets

        self.table = table
        self.order = list(range(len(table.rows)))
        self.page = 0
        self.sort_by = widgets.Dropdown(
            options=["(as returned)", *table.columns],
            description="Sort by",
            layout={"width": "auto"},
        )
        self.descending = widgets.ToggleButton(value=False, description="descending", icon="sort")
        self.previous = widgets.Button(description="◀", layout={"width": "3em"})
        self.next = widgets.Button(description="▶", layout={"width": "3em"})
        self.position = widgets.Label()
        self.grid = widgets.HTML()
        self.sort_by.observe(lambda _: self._sort(), names="value")
        self.descending.observe(lambda _: self._sort(), names="value")
        self.previous.on_click(lambda _: self.go(self.page - 1))
        self.next.on_click(lambda _: self.go(self.page + 1))
        controls = widgets.HBox(
            [self.sort_by, self.descending, self.previous, self.next, self.position]
        )
        self.widget = widgets.VBox([controls, self.grid])
        self._render()

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.order) // PAGE_ROWS))

    def sort(self, column: str | None, descending: bool = False) -> None:
        """Sort by a column (None: the order the sandbox returned), from code or the controls."""
        self.sort_by.value = column or "(as returned)"
        self.descending.value = descending

    def go(self, page: int) -> None:
        self.page = min(max(page, 0), self.pages - 1)
        self._render()

    def visible_rows(self) -> list[list[Any]]:
        start = self.page * PAGE_ROWS
        return [self.table.rows[i] for i in self.order[start : start + PAGE_ROWS]]

    def _sort(self) -> None:
        indices = list(range(len(self.table.rows)))
        if self.sort_by.value in self.table.columns:
            column = self.table.columns.index(self.sort_by.value)
            indices.sort(
                key=lambda i: _sort_key(self.table.rows[i][column]), reverse=self.descending.value
            )
        self.order = indices
        self.page = 0
        self._render()

    def _render(self) -> None:
        start = self.page * PAGE_ROWS
        end = min(start + PAGE_ROWS, len(self.order))
        self.position.value = f"rows {start + 1}–{end} of {len(self.order):,}"
        caption = ""
        if self.table.capped:
            caption = (
                f"The first {len(self.table.rows):,} of {self.table.total:,} rows reached the "
                "notebook; the rest stay in the sandbox (the value is `_` there)."
            )
        self.grid.value = table_html(self.table.columns, self.visible_rows(), caption)
        self.previous.disabled = self.page == 0
        self.next.disabled = self.page >= self.pages - 1

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = self.widget._repr_mimebundle_(**kwargs)
        if isinstance(data, dict):
            data["text/plain"] = table_text(self.table)
        return data


def tree_html(value: Any, depth: int = 0) -> str:
    """Nested dicts and lists as collapsible <details>, the first levels open."""
    if isinstance(value, dict):
        items = list(value.items())
        label = f"{{…}} {len(items)} keys"
    elif isinstance(value, list):
        items = list(enumerate(value))
        label = f"[…] {len(items)} items"
    else:
        return f"<code>{html.escape(json.dumps(value, ensure_ascii=False))}</code>"
    children = "".join(
        f"<li><b>{html.escape(str(key))}</b>: {tree_html(child, depth + 1)}</li>"
        for key, child in items[:TREE_ITEMS]
    )
    if len(items) > TREE_ITEMS:
        children += f"<li>… {len(items) - TREE_ITEMS} more</li>"
    opened = " open" if depth < 2 else ""
    return (
        f"<details{opened}><summary>{label}</summary>"
        f"<ul style='list-style:none;margin:0;padding-left:1.2em'>{children}</ul></details>"
    )
