"""The review widget: the code, the tools chosen, guardrail findings, and Run / Cancel.

Clicks arrive as comm messages while the kernel is idle; Run executes in the session's sandbox
and the result appears in the widget's output area below the buttons. ``run()`` and
``cancel()`` do the same from code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
from IPython.display import display

from .args import CellArgs
from .display import Notice, highlight_html

if TYPE_CHECKING:
    from cemcp_kernel.engine import Plan

    from .magics import McpMagics


class Review:
    def __init__(self, magics: McpMagics, plan: Plan, args: CellArgs) -> None:
        self.magics = magics
        self.plan = plan
        self.args = args
        self.state = "pending"
        self.output = widgets.Output()
        self.run_button = widgets.Button(description="Run", button_style="success", icon="play")
        self.cancel_button = widgets.Button(description="Cancel", icon="times")
        self.run_button.on_click(lambda _: self.run())
        self.cancel_button.on_click(lambda _: self.cancel())
        code = widgets.HTML(highlight_html(plan.code))
        tools = ", ".join(f"{t.qualname} ({t.score:.2f})" for t in plan.tools) or "none"
        info = [f"Tools shown to the generator: {tools}"]
        info += [f"⚠ {finding}" for finding in plan.findings]
        self.widget = widgets.VBox(
            [
                widgets.HTML("<b>Review the code before it runs in the sandbox</b>"),
                code,
                widgets.HTML("<br>".join(info)),
                widgets.HBox([self.run_button, self.cancel_button]),
                self.output,
            ]
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget, with a text form that shows the code where widgets do not render."""
        data = self.widget._repr_mimebundle_(**kwargs)
        if isinstance(data, dict):
            data["text/plain"] = f"Review (run with --yes to skip):\n{self.plan.code}".rstrip()
        return data

    def _done(self, state: str) -> None:
        self.state = state
        self.run_button.disabled = True
        self.cancel_button.disabled = True

    def run(self) -> None:
        if self.state != "pending":
            return
        self._done("running")
        with self.output:
            value = self.magics.run_code(self.plan.code, self.args, self.plan)
            if value is not None:
                display(value)
        self.state = "done"

    def cancel(self) -> None:
        if self.state != "pending":
            return
        self._done("cancelled")
        with self.output:
            display(Notice("Cancelled: the code did not run."))
