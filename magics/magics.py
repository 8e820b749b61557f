"""``%%mcp`` and friends: a thin layer that parses flags, calls the engine and displays results."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from cemcp_kernel.engine import Engine, Plan
from cemcp_kernel.errors import CemcpError
from cemcp_kernel.sandbox.results import ExecutionResult

from .args import CellArgs, parse_assignments, parse_cell_args
from .display import CemcpMessage, Code, Notice, Result, SandboxCodeError

if TYPE_CHECKING:
    from .review import Review


def session_name() -> str:
    """The notebook's name when Jupyter says it (so a session can be resumed), else 'default'."""
    name = os.environ.get("JPY_SESSION_NAME")
    return Path(name).stem if name else "default"


@magics_class
class McpMagics(Magics):
    def __init__(self, shell: Any, engine: Engine | None = None) -> None:
        super().__init__(shell)
        self._engine = engine
        self.session = session_name()
        self.last_plan: Plan | None = None
        self.last_review: Review | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            try:
                self._engine = Engine()
            except CemcpError as exc:
                raise CemcpMessage(str(exc)) from None
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    # --- %%mcp ---------------------------------------------------------------------------------

    @cell_magic
    def mcp(self, line: str, cell: str) -> Any:
        """Turn a request into code with your MCP tools, review it, run it in the sandbox.

        %%mcp [--yes] [--code] [--insert] [--strict] [--timeout S] [--tools a.b,c.d] [-o NAME]
        """
        args = parse_cell_args(line)
        if not cell.strip():
            raise CemcpMessage(
                "The cell is empty: write a request below %%mcp, e.g. Calculate 5 + 3"
            )
        try:
            if args.code:
                return self.run_code(cell, args)
            plan = self.engine.plan(
                cell.strip(), session=self.session, tools=args.tools, strict=args.strict
            )
        except CemcpError as exc:
            raise CemcpMessage(str(exc)) from None
        self.last_plan = plan
        if plan.blocked:
            display(Code(plan.code, caption=_caption(plan)))
            raise CemcpMessage(
                "Guardrails blocked this code; it did not run:\n"
                + "\n".join(f"  {f}" for f in plan.blocked)
            )
        if args.insert:
            self.shell.set_next_input(f"%%mcp --code\n{plan.code}", replace=False)
            display(Notice("The code is in the next cell: edit it, then run that cell."))
            return None
        if args.yes or self.engine.settings.review == "auto":
            display(Code(plan.code, caption=_caption(plan), provenance=_provenance(plan)))
            for finding in plan.findings:
                display(Notice(str(finding), "warn"))
            return self.run_code(plan.code, args, plan)
        from .review import Review

        self.last_review = Review(self, plan, args)
        display(self.last_review)
        return None

    def run_code(self, code: str, args: CellArgs, plan: Plan | None = None) -> Any:
        """Execute in the session's sandbox, streaming output; return the value for display."""
        try:
            result = self.engine.execute(
                code, session=self.session, timeout=args.timeout, on_stream=_write, plan=plan
            )
        except CemcpError as exc:
            raise CemcpMessage(str(exc)) from None
        return self.show(result, args)

    def show(self, result: ExecutionResult, args: CellArgs) -> Any:
        for notice in result.notices:
            display(Notice(notice, "warn"))
        if result.error is not None:
            raise SandboxCodeError(result.error)
        if result.value is None:
            return None
        if args.output:
            value = result.value
            self.shell.user_ns[args.output] = value.data if value.is_json else value.repr
        return Result(result.value, {"sandbox": result.sandbox})

    # --- line magics ---------------------------------------------------------------------------

    @line_magic
    def mcp_config(self, line: str) -> Any:
        """Show settings, or change them: %mcp_config model.name=gpt-4o sandbox.timeout=30"""
        pairs = parse_assignments(line)
        try:
            settings = self.engine.configure(**pairs) if pairs else self.engine.settings
        except CemcpError as exc:
            raise CemcpMessage(str(exc)) from None
        return _Settings(settings.public_dump())

    @line_magic
    def mcp_reset(self, line: str) -> None:
        """Give this notebook a fresh sandbox interpreter; files in /workspace stay."""
        self.engine.reset(self.session)
        display(Notice("The session has a fresh interpreter; /workspace is unchanged."))

    @line_magic
    def mcp_status(self, line: str) -> Any:
        """Backend, pool, model endpoint and catalog size."""
        engine = self.engine
        pool = engine.pool_status()
        catalog = engine.catalog()
        lines = [
            f"sandbox backend: {engine.sandboxes.backend or 'not chosen yet'}"
            f" (configured: {engine.settings.sandbox.backend})",
            f"pool: {pool.warm} warm, {pool.leased} leased, {pool.starting} starting (size {pool.size})",
            f"model: {engine.settings.model.endpoint}",
            f"catalog: {len(catalog.tools)} tools in {len(catalog.servers)} servers"
            + (f", {len(catalog.problems)} broken files" if catalog.problems else ""),
            f"selection: {engine.selector().mode}",
            f"workspace: {engine.settings.workspace_dir}",
        ]
        live = engine.bridge.status()
        if live:
            lines.append(
                "live MCP servers: "
                + ", ".join(f"{s.name} ({'running' if s.running else 'stopped'})" for s in live)
            )
        if pool.last_error:
            lines.append(f"last sandbox error: {pool.last_error}")
        print("\n".join(lines))
        return None


class _Settings:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        lines = []
        for key, value in self.data.items():
            if isinstance(value, dict):
                lines += [f"{key}.{k} = {v!r}" for k, v in value.items()]
            else:
                lines.append(f"{key} = {value!r}")
        return {"text/plain": "\n".join(lines), "application/json": self.data}


def _write(name: str, text: str) -> None:
    stream = sys.stderr if name == "stderr" else sys.stdout
    stream.write(text)
    stream.flush()


def _caption(plan: Plan) -> str:
    source = plan.generated.model or "rule-based generator"
    tools = ", ".join(plan.generated.tools_used) or "no tools"
    return f"generated by {source} using {tools}"


def _provenance(plan: Plan) -> dict[str, Any]:
    return {
        "request": plan.request,
        "generator": plan.generated.generator,
        "model": plan.generated.model,
        "tools": plan.generated.tools_used,
    }
