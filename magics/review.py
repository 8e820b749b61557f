"""The review widget: code streamed in while the model writes, then highlighted and editable,
with the tools chosen (and their scores), guardrail findings, token counts, and
Run / Edit / Regenerate / Cancel.

Clicks arrive as comm messages while the kernel is idle; Run executes in the session's sandbox
and the result appears in the widget's output area. ``run()``, ``edit()``, ``regenerate()`` and
``cancel()`` do the same from code.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
from IPython.display import display

from cemcp_kernel.errors import CemcpError

from .display import Notice, highlight_html

if TYPE_CHECKING:
    from cemcp_kernel.engine import Plan

    from .args import CellArgs
    from .magics import McpMagics


class Progress:
    """A transient status line: streamed model output and what cemcp is waiting for.

    Its text form is empty, so saved notebooks and nbval see the same thing whatever happened."""

    def __init__(self, text: str) -> None:
        self.widget = widgets.HTML(_status(text))
        self._streamed: list[str] = []

    def set(self, text: str) -> None:
        self.widget.value = _status(text)

    def stream(self, token: str) -> None:
        self._streamed.append(token)
        shown = html.escape("".join(self._streamed)[-2000:])
        self.widget.value = _status("Generating code…") + f"<pre style='margin:0'>{shown}</pre>"

    def close(self) -> None:
        self.widget.close()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = self.widget._repr_mimebundle_(**kwargs)
        if isinstance(data, dict):
            data["text/plain"] = ""
        return data


def _status(text: str) -> str:
    return f"<span style='color:#666'>⏳ {html.escape(text)}</span>"


class Review:
    def __init__(self, magics: McpMagics, plan: Plan, args: CellArgs) -> None:
        self.magics = magics
        self.request = plan.request
        self.values = plan.values  # notebook variables written into the request
        self.args = args
        self.plan: Plan | None = None
        self.state = "generating"
        self.progress = Progress("Generating code…")
        self.progress.widget.layout.display = "none"
        self.code_view = widgets.HTML()
        self.editor = widgets.Textarea(
            layout={"width": "100%", "height": "14em", "display": "none"}
        )
        self.info = widgets.HTML()
        self.run_button = widgets.Button(description="Run", button_style="success", icon="play")
        self.edit_button = widgets.Button(description="Edit", icon="pencil")
        self.regenerate_button = widgets.Button(description="Regenerate", icon="refresh")
        self.cancel_button = widgets.Button(description="Cancel", icon="times")
        self.run_button.on_click(lambda _: self._clicked(self.run))
        self.edit_button.on_click(lambda _: self.edit())
        self.regenerate_button.on_click(lambda _: self._clicked(self.regenerate))
        self.cancel_button.on_click(lambda _: self.cancel())
        self.output = widgets.Output()
        self.buttons = [
            self.run_button,
            self.edit_button,
            self.regenerate_button,
            self.cancel_button,
        ]
        self.widget = widgets.VBox(
            [
                widgets.HTML("<b>Review the code before it runs in the sandbox</b>"),
                self.progress.widget,
                self.code_view,
                self.editor,
                self.info,
                widgets.HBox(self.buttons),
                self.output,
            ]
        )
        self._show(plan)

    @property
    def code(self) -> str:
        """The code Run executes: the edited text once Edit was used, else the generated code."""
        if self.editor.layout.display != "none":
            return self.editor.value
        return self.plan.code if self.plan is not None else ""

    def generate(self) -> None:
        """Ask the generator again, streaming its output into the widget."""
        self.state = "generating"
        self._enable(False)
        self.code_view.layout.display = "none"
        self.progress.widget.layout.display = None
        self.progress._streamed.clear()
        self.progress.set("Generating code…")
        try:
            self.plan = self.magics.engine.plan(
                self.request,
                session=self.magics.session,
                tools=self.args.tools,
                strict=self.args.strict,
                on_token=self.progress.stream,
                values=self.values,
            )
        except CemcpError as exc:
            self.state = "failed"
            self.progress.set(f"No code: {exc}")
            raise
        self._show(self.plan)

    def _show(self, plan: Plan) -> None:
        self.plan = plan
        self.magics.last_plan = plan
        self.progress.widget.layout.display = "none"
        self.editor.value = plan.code
        self.editor.layout.display = "none"
        self.code_view.layout.display = None
        self.code_view.value = highlight_html(plan.code)
        self.info.value = _describe(plan)
        self.state = "pending"
        self._enable(True)
        self.run_button.disabled = bool(plan.blocked)

    def edit(self) -> None:
        """Show the code in an editor; Run then executes what is there."""
        if self.state != "pending":
            return
        self.editor.layout.display = None
        self.code_view.layout.display = "none"

    def regenerate(self) -> None:
        if self.state == "pending":
            self.generate()

    @staticmethod
    def _clicked(action: Callable[[], None]) -> None:
        try:
            action()
        except Exception:
            pass  # already shown in the widget; a click has no cell to raise into

    def run(self) -> None:
        if self.state != "pending" or self.plan is None:
            return
        self.state = "running"
        self._enable(False)
        code = self.code
        plan = self.plan if code == self.plan.code else None  # edited code is the user's own
        failure: Exception | None = None
        with self.output:  # shows an error raised inside (its own traceback), then swallows it
            try:
                value = self.magics.run_code(code, self.args, plan)
                if value is not None:
                    display(value)
            except Exception as exc:
                failure = exc
                raise
        self.state = "failed" if failure is not None else "done"
        if failure is not None:
            raise failure

    def cancel(self) -> None:
        if self.state != "pending":
            return
        self.state = "cancelled"
        self._enable(False)
        with self.output:
            display(Notice("Cancelled: the code did not run."))

    def _enable(self, enabled: bool) -> None:
        for button in self.buttons:
            button.disabled = not enabled

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget, with a text form that shows the code where widgets do not render."""
        data = self.widget._repr_mimebundle_(**kwargs)
        if isinstance(data, dict):
            data["text/plain"] = f"Review (run with --yes to skip):\n{self.code}".rstrip()
        return data


def _describe(plan: Plan) -> str:
    generated = plan.generated
    tools = ", ".join(f"{t.qualname} ({t.score:.2f})" for t in plan.tools) or "none"
    source = f"model {generated.model}" if generated.model else "the rule-based generator"
    lines = [f"Tools shown to {source}: {html.escape(tools)}"]
    if generated.prompt_tokens or generated.completion_tokens:
        lines.append(
            f"Tokens: {generated.prompt_tokens:,} prompt, {generated.completion_tokens:,} completion"
            + (f" ({generated.attempts} attempts)" if generated.attempts > 1 else "")
        )
    lines += [html.escape(note) for note in generated.notes]
    for finding in plan.findings:
        mark = "⛔ blocked" if finding in plan.blocked else "⚠"
        lines.append(f"{mark} {html.escape(str(finding))}")
    return "<br>".join(lines)
