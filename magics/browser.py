"""The tool browser of ``%mcp_tools``: servers and skills, a search that uses the same selection as
``%%mcp``, three detail levels, each tool's example call, and the tool files that are broken."""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from .display import highlight_html

if TYPE_CHECKING:
    from cemcp_kernel.catalog import Catalog, ToolSpec
    from cemcp_kernel.engine import Engine

DETAILS = ("name", "description", "source")


class ToolBrowser:
    def __init__(self, engine: Engine, query: str = "") -> None:
        self.engine = engine
        self.catalog: Catalog = engine.catalog()
        self.search = widgets.Text(
            value=query, placeholder="Search tools, as %%mcp would…", continuous_update=False
        )
        self.detail = widgets.ToggleButtons(options=DETAILS, value="description")
        self.listing = widgets.Select(options=[], rows=12, layout={"width": "45%"})
        self.card = widgets.HTML(layout={"width": "55%"})
        self.footer = widgets.HTML()
        self.search.observe(lambda _: self.refresh(), names="value")
        self.detail.observe(lambda _: self.refresh(), names="value")
        self.listing.observe(lambda change: self.select(change["new"]), names="value")
        self.widget = widgets.VBox(
            [
                widgets.HBox([self.search, self.detail]),
                widgets.HBox([self.listing, self.card]),
                self.footer,
            ]
        )
        self.refresh()

    def tools(self) -> list[ToolSpec]:
        """Everything, by server; or the selection's ranking for the search text."""
        query = self.search.value.strip()
        if not query:
            return self.catalog.tools
        return [scored.tool for scored in self.engine.select(query)]

    def refresh(self) -> None:
        tools = self.tools()
        self.listing.options = [(self._label(t), t.qualname) for t in tools]
        self.footer.value = self._footer(len(tools))
        self.select(tools[0].qualname if tools else None)

    def select(self, qualname: str | None) -> None:
        tool = self.catalog.get(qualname) if qualname else None
        if tool is None:
            self.card.value = "<i>No tool matches.</i>"
            return
        if self.listing.value != qualname:
            self.listing.value = qualname
        self.card.value = self._card(tool)

    def _label(self, tool: ToolSpec) -> str:
        kind = "skill " if tool.kind == "skill" else ""
        if self.detail.value == "name":
            return f"{kind}{tool.qualname}"
        return f"{kind}{tool.qualname} — {tool.summary}"[:120]

    def _card(self, tool: ToolSpec) -> str:
        parts = [f"<b>{html.escape(tool.qualname)}</b>", highlight_html(tool.signature)]
        if self.detail.value != "name":
            parts.append(f"<pre style='white-space:pre-wrap'>{html.escape(tool.description)}</pre>")
        parts.append("<b>Example</b>" + highlight_html(tool.example()))
        if self.detail.value == "source":
            try:
                source = Path(tool.path).read_text()
            except OSError as exc:
                source = f"# cannot read {tool.path}: {exc}"
            parts.append("<b>Source</b>" + highlight_html(source))
        return "".join(parts)

    def _footer(self, shown: int) -> str:
        lines = [
            f"{shown} of {len(self.catalog.tools)} tools and skills · selection: "
            f"{html.escape(self.engine.selector().mode)}"
        ]
        for problem in self.catalog.problems:
            where = html.escape(self._relative(problem.path))
            lines.append(f"⚠ broken: {where}: {html.escape(problem.message)}")
        return "<br>".join(lines)

    def _relative(self, path: str) -> str:
        project = self.engine.settings.project_dir
        return str(Path(path).relative_to(project)) if Path(path).is_relative_to(project) else path

    def text(self) -> str:
        """The listing as text, grouped by server, with broken files at the end."""
        lines: list[str] = []
        current = None
        for tool in self.tools():
            group = "skills" if tool.kind == "skill" else tool.server
            if group != current:
                lines.append(f"{group}:")
                current = group
            lines.append(f"  {tool.qualname}{tool.signature[tool.signature.index('(') :]}")
            if self.detail.value != "name" and tool.summary:
                lines.append(f"      {tool.summary}")
        for problem in self.catalog.problems:
            lines.append(f"broken: {self._relative(problem.path)}: {problem.message}")
        return "\n".join(lines) or "No tools."

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = self.widget._repr_mimebundle_(**kwargs)
        if isinstance(data, dict):
            data["text/plain"] = self.text()
        return data
