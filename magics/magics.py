"""``%%mcp`` and friends: a thin layer that parses flags, calls the engine and displays results.

Loading this module must stay cheap: it runs on the kernel's start path. The engine (pydantic
models, the sandbox pool) is imported and built on a background thread that the first cell
waits for, so the kernel answers ``kernel_info_request`` without waiting for cemcp.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from cemcp_kernel.errors import CemcpError

from .display import CemcpMessage, Code, Figure, Notice, SandboxCodeError, result_view
from .interpolate import interpolate

if TYPE_CHECKING:
    from cemcp_kernel.engine import Engine, Plan
    from cemcp_kernel.sandbox.results import ExecutionResult

    from .args import CellArgs
    from .review import Review


F = TypeVar("F", bound=Callable[..., Any])


def user_errors(method: F) -> F:
    """cemcp's own errors leave a magic as a message without a traceback (see CemcpMessage)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except CemcpError as exc:
            raise CemcpMessage(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def session_name() -> str:
    """The notebook's name when Jupyter says it (so a session can be resumed), else 'default'."""
    name = os.environ.get("JPY_SESSION_NAME")
    return Path(name).stem if name else "default"


@magics_class
class McpMagics(Magics):
    def __init__(self, shell: Any, engine: Engine | None = None) -> None:
        super().__init__(shell)
        self._engine = engine
        self._starting: threading.Thread | None = None
        self._start_error: Exception | None = None
        self.session = session_name()
        self.last_plan: Plan | None = None
        self.last_review: Review | None = None

    def start_engine(self) -> None:
        """Import and build the engine on a background thread; its sandboxes warm up after."""
        if self._engine is None and self._starting is None:
            self._starting = threading.Thread(target=self._build_engine, name="cemcp-start")
            self._starting.start()

    def _build_engine(self) -> None:
        from cemcp_kernel.engine import Engine

        try:
            self._engine = Engine()
        except Exception as exc:  # reported by the first cell that needs the engine
            self._start_error = exc

    @property
    def engine(self) -> Engine:
        if self._starting is not None:
            self._starting.join()
            self._starting = None
        if self._engine is None:
            error, self._start_error = self._start_error, None
            if error is None:
                self._build_engine()
                error, self._start_error = self._start_error, None
            if error is not None:
                raise CemcpMessage(str(error)) from None
        assert self._engine is not None
        return self._engine

    def close(self) -> None:
        if self._starting is not None:
            self._starting.join()
            self._starting = None
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    # --- %%mcp ---------------------------------------------------------------------------------

    @cell_magic
    @user_errors
    def mcp(self, line: str, cell: str) -> Any:
        """Turn a request into code with your MCP tools, review it, run it in the sandbox.

        %%mcp [--yes] [--code] [--insert] [--strict] [--timeout S] [--tools a.b,c.d] [-o NAME]

        ``{name}`` in the request stands for the value of the notebook variable ``name``.
        """
        from .args import parse_cell_args

        args = parse_cell_args(line)
        if not cell.strip():
            raise CemcpMessage(
                "The cell is empty: write a request below %%mcp, e.g. Calculate 5 + 3"
            )
        if args.code:
            return self.run_code(cell, args)
        request = interpolate(cell.strip(), self.shell.user_ns)
        from .review import Progress

        progress = Progress("Generating code…")
        display(progress)
        if self._starting is not None and self._starting.is_alive():
            progress.set("Starting cemcp (the sandbox pool warms up)…")
        try:
            engine = self.engine
            progress.set("Generating code…")
            plan = engine.plan(
                request.text,
                session=self.session,
                tools=args.tools,
                strict=args.strict,
                on_token=progress.stream,
                values=request.values,
            )
        finally:
            progress.close()
        self.last_plan = plan
        if plan.blocked:
            display(Code(plan.code, caption=_caption(plan)))
            raise CemcpMessage(_blocked(plan))
        if args.insert:
            self.shell.set_next_input(f"%%mcp --code\n{plan.code}", replace=False)
            display(Notice("The code is in the next cell: edit it, then run that cell."))
            return None
        if not args.yes and self.engine.settings.review != "auto":
            from .review import Review

            self.last_review = Review(self, plan, args)
            display(self.last_review)
            return None
        display(Code(plan.code, caption=_caption(plan), provenance=_provenance(plan)))
        for finding in plan.findings:
            display(Notice(str(finding), "warn"))
        return self.run_code(plan.code, args, plan)

    @user_errors
    def run_code(self, code: str, args: CellArgs, plan: Plan | None = None) -> Any:
        """Execute in the session's sandbox, streaming output; return the value for display."""
        result = self.engine.execute(
            code, session=self.session, timeout=args.timeout, on_stream=_write, plan=plan
        )
        return self.show(result, args)

    def show(self, result: ExecutionResult, args: CellArgs) -> Any:
        for png in result.images:
            display(Figure(png))
        for notice in result.notices:
            display(Notice(notice, "warn"))
        if result.error is not None:
            raise SandboxCodeError(result.error)
        if result.value is None:
            return None
        if args.output:
            self.shell.user_ns[args.output] = host_value(result.value)
        return result_view(result.value, {"sandbox": result.sandbox})

    # --- line magics ---------------------------------------------------------------------------

    @line_magic
    @user_errors
    def mcp_config(self, line: str) -> Any:
        """Show settings, or change them: %mcp_config model.name=gpt-4o sandbox.timeout=30"""
        from .args import parse_assignments

        pairs = parse_assignments(line)
        if not pairs:
            return _Settings(self.engine.settings.public_dump())
        self.engine.configure(**pairs)
        display(Notice(f"Set {', '.join(pairs)} for this kernel."))
        return None

    @line_magic
    @user_errors
    def mcp_tools(self, line: str) -> Any:
        """Browse servers, tools and skills: %mcp_tools [search words]"""
        from .browser import ToolBrowser

        return ToolBrowser(self.engine, line.strip())

    @line_magic
    @user_errors
    def mcp_history(self, line: str) -> Any:
        """This session's requests, code and results."""
        from cemcp_kernel.sandbox.results import Table

        from .views import TableView

        records = self.engine.log(self.session).records
        if not records:
            display(Notice("No %%mcp cells have run in this session yet."))
            return None
        rows = [
            [
                i,
                r.request or "(code)",
                r.code.strip().splitlines()[0] if r.code.strip() else "",
                r.summary,
                "ok" if r.ok else "error",
                ", ".join(r.tools),
            ]
            for i, r in enumerate(records, 1)
        ]
        columns = ["#", "request", "code (first line)", "result", "status", "tools"]
        return TableView(Table(columns=columns, rows=rows, total=len(rows)))

    @line_magic
    @user_errors
    def mcp_resume(self, line: str) -> None:
        """Take up this notebook's session after a kernel restart: %mcp_resume [--no-replay]"""
        from .args import parse_resume_args

        replay = parse_resume_args(line)
        report = self.engine.resume(self.session, replay=replay)
        if not report.turns:
            display(Notice(f"No saved turns for session {self.session!r}."))
            return
        done = f"; {report.replayed} replayed to rebuild the variables" if replay else ""
        display(Notice(f"Resumed {report.turns} turns of session {self.session!r}{done}."))
        for failure in report.failures:
            display(Notice(f"Replay failed: {failure}", "warn"))

    @line_magic
    @user_errors
    def mcp_skill(self, line: str) -> None:
        """Keep the last successful code as a skill: %mcp_skill save NAME [--description TEXT] [--force]"""
        from .args import parse_skill_args

        args = parse_skill_args(line)
        folder = self.engine.save_skill(
            args.name, session=self.session, description=args.description, force=args.force
        )
        display(
            Notice(
                f"Saved skill {args.name!r} in skills/{folder.name}/; "
                f"use it with: from skills.{args.name} import {args.name}"
            )
        )

    @line_magic
    @user_errors
    def mcp_skills(self, line: str) -> None:
        """The skills %%mcp can use."""
        skills = [t for t in self.engine.catalog().tools if t.kind == "skill"]
        if not skills:
            print("No skills yet. Save one with: %mcp_skill save NAME")
        for skill in skills:
            print(f"{skill.import_line}\n    {skill.summary}")

    @line_magic
    @user_errors
    def mcp_reset(self, line: str) -> None:
        """Give this notebook a fresh sandbox interpreter; files in /workspace stay."""
        self.engine.reset(self.session)
        display(Notice("The session has a fresh interpreter; /workspace is unchanged."))

    @line_magic
    @user_errors
    def mcp_status(self, line: str) -> Any:
        """Backend, pool, model endpoint and catalog size."""
        engine = self.engine
        pool = engine.pool_status()
        catalog = engine.catalog()
        from cemcp_kernel.sandbox import backend_class, cgroups

        chosen = engine.sandboxes.backend
        isolation = backend_class(chosen).isolation if chosen else "not chosen yet"
        lines = [
            f"sandbox backend: {chosen or 'not chosen yet'}"
            f" (configured: {engine.settings.sandbox.backend}): {isolation}",
            f"limits: {cgroups.describe()}",
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


def host_value(value: Any) -> Any:
    """A sandbox value for the notebook's namespace: a DataFrame for tables, the data for
    JSON, else the repr."""
    if value.table is not None:
        import pandas as pd

        return pd.DataFrame(value.table.rows, columns=value.table.columns)
    return value.data if value.is_json else value.repr


def _write(name: str, text: str) -> None:
    stream = sys.stderr if name == "stderr" else sys.stdout
    stream.write(text)
    stream.flush()


def _caption(plan: Plan) -> str:
    source = plan.generated.model or "rule-based generator"
    tools = ", ".join(plan.generated.tools_used) or "no tools"
    return f"generated by {source} using {tools}"


def _blocked(plan: Plan) -> str:
    findings = "\n".join(f"  {f}" for f in plan.blocked)
    return f"Guardrails blocked this code; it did not run:\n{findings}"


def _provenance(plan: Plan) -> dict[str, Any]:
    return {
        "request": plan.request,
        "generator": plan.generated.generator,
        "model": plan.generated.model,
        "tools": plan.generated.tools_used,
    }
