"""The engine: request -> tools -> code -> review -> sandbox -> result, usable without a kernel.

It owns one asyncio loop in a background thread. Callers (the magics, scripts) are synchronous
and wait on futures; a KeyboardInterrupt while waiting interrupts the code in the sandbox, so a
Jupyter interrupt reaches the sandbox within a second.

    from cemcp_kernel import Engine
    with Engine() as engine:
        turn = engine.run("Calculate 5 + 3")
        print(turn.result.value.data)   # 8
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import stat
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from .bridge import Bridge
from .catalog import Catalog, Discovery
from .config import Settings, load_settings
from .embeddings import cache_file as embedding_cache_file
from .errors import CemcpError, ConfigError, GuardrailError
from .generation import GeneratedCode, Generator, TokenCallback, make_generator
from .generation.prompt import PromptContext
from .guardrails import Finding, blocking
from .guardrails import check as check_guardrails
from .paths import cache_dir
from .sandbox import SandboxFactory, packages
from .sandbox.backend import INTERRUPT_GRACE_S
from .sandbox.channel import StreamCallback
from .sandbox.pool import Pool, PoolStatus
from .sandbox.results import ExecutionResult
from .selection import Scored, Selector
from .semantic import SemanticIndexer
from .session import Record, SessionLog

T = TypeVar("T")
DEFAULT_SESSION = "default"
_REPLACEABLE = ("timeout", "limit", "sandbox")
_WORKSPACE_LISTED = 40
_POLL_S = 0.05


class ToolChoice(BaseModel):
    """A tool shown to the generator, with its selection score."""

    qualname: str
    score: float
    signature: str
    import_line: str


class Plan(BaseModel):
    """Generated code awaiting review, with everything a reviewer needs to judge it."""

    request: str
    session: str
    values: dict[str, str] = Field(default_factory=dict)  # notebook variables in the request
    tools: list[ToolChoice]
    generated: GeneratedCode
    selection: str = ""  # how the tools were chosen: Selector.mode, or "named by the user"
    findings: list[Finding] = Field(default_factory=list)
    strict: bool = False
    timings_ms: dict[str, float] = Field(default_factory=dict)

    @property
    def code(self) -> str:
        return self.generated.code

    @property
    def blocked(self) -> list[Finding]:
        return blocking(self.findings, self.strict)


class Turn(BaseModel):
    plan: Plan | None
    result: ExecutionResult


class ResumeReport(BaseModel):
    turns: int
    replayed: int = 0
    failures: list[str] = Field(default_factory=list)


class Engine:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        warm: bool = True,
        semantic: SemanticIndexer | None = None,
    ) -> None:
        """``semantic`` replaces the default indexer (e.g. one with its own model loader)."""
        self.settings = settings or load_settings()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="cemcp-engine", daemon=True
        )
        self._thread.start()
        self._discovery = Discovery(cache_dir() / "catalog.json")
        self._selector: Selector | None = None
        self._selector_key = ""
        self.semantic = semantic or self._make_semantic()
        self._generator: Generator | None = None
        self._logs: dict[str, SessionLog] = {}
        self._closed = False
        self.bridge = Bridge(self.settings)
        self.pool = self._make_pool(warm)

    # --- plumbing ------------------------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._loop.is_closed():
            coro.close()
            raise CemcpError("This engine is closed: create a new Engine.")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._submit(coro).result()

    def _make_semantic(self) -> SemanticIndexer:
        selection = self.settings.selection
        return SemanticIndexer(
            selection.semantic, embedding_cache_file(cache_dir()), wait=selection.wait
        )

    def _make_pool(self, warm: bool) -> Pool:
        self.sandboxes = SandboxFactory(self.settings, self.bridge.call)
        pool = Pool(self.sandboxes, self.settings.sandbox.pool_size)
        if warm:
            self._loop.call_soon_threadsafe(pool.start)
        return pool

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every sandbox and the engine's thread. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.semantic.close()
        for closing in (self._aclose, self.bridge.close, _finish_loop):
            try:
                self._submit(closing()).result(timeout=15)
            except Exception:  # closing must not fail; the processes die with their stdin anyway
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _aclose(self) -> None:
        if self._generator is not None:
            await self._generator.aclose()
        await self.pool.close()

    # --- configuration -------------------------------------------------------------------------

    def configure(self, **overrides: Any) -> Settings:
        """Change settings at run time (dotted keys with ``__``, e.g. ``sandbox__timeout=30``).

        Sandbox settings other than per-execution ones take effect in a new pool.
        """
        old = self.settings
        self.settings = old.updated({k.replace("__", "."): v for k, v in overrides.items()})
        if self._generator is not None:
            self._submit(self._generator.aclose())
        self._generator = None
        if old.selection != self.settings.selection:
            self.semantic.close()
            self.semantic = self._make_semantic()
            self._selector = None
        sandbox_old = old.sandbox.model_dump(exclude={"timeout", "max_output_bytes"})
        sandbox_new = self.settings.sandbox.model_dump(exclude={"timeout", "max_output_bytes"})
        paths_changed = any(
            getattr(old, k) != getattr(self.settings, k)
            for k in ("servers_dir", "skills_dir", "workspace_dir")
        )
        self.bridge.settings = self.settings
        if paths_changed:  # another tool tree or project: its servers, not these
            old_bridge, self.bridge = self.bridge, Bridge(self.settings)
            self._submit(old_bridge.close())
        if paths_changed:
            self._logs.clear()  # session logs live in the workspace
        if sandbox_old != sandbox_new or paths_changed:
            old_pool = self.pool
            self.pool = self._make_pool(True)
            self._submit(old_pool.close())
        return self.settings

    @property
    def generator(self) -> Generator:
        if self._generator is None:
            self._generator = make_generator(self.settings)
        return self._generator

    # --- stages --------------------------------------------------------------------------------

    def catalog(self) -> Catalog:
        return self._discovery.discover(self.settings.servers_dir, self.settings.skills_dir)

    def selector(self) -> Selector:
        """The current catalog's selector, hybrid once its dense index is ready (never waits)."""
        catalog = self.catalog()
        key = catalog.fingerprint()
        dense = self.semantic.index_for(catalog, key)
        if self._selector is None or key != self._selector_key:
            self._selector, self._selector_key = Selector(catalog), key
        self._selector.dense = dense
        self._selector.keyword_reason = "" if dense is not None else self.semantic.reason
        return self._selector

    def select(self, request: str, tools: list[str] | None = None) -> list[Scored]:
        return self._select(self.selector(), request, tools)

    def _select(self, selector: Selector, request: str, tools: list[str] | None) -> list[Scored]:
        if tools:
            return selector.pick(tools)
        return selector.search(request, self.settings.top_k)

    def log(self, session: str = DEFAULT_SESSION) -> SessionLog:
        if session not in self._logs:
            self._logs[session] = SessionLog(self.settings.workspace_dir, session)
        return self._logs[session]

    def plan(
        self,
        request: str,
        *,
        session: str = DEFAULT_SESSION,
        tools: list[str] | None = None,
        on_token: TokenCallback | None = None,
        strict: bool = False,
        values: dict[str, str] | None = None,
    ) -> Plan:
        """Select tools and generate code for review. Raises GenerationError with a clear message.

        ``values`` are notebook variables already written into the request (name -> literal).
        """
        started = time.perf_counter()
        selector = self.selector()
        chosen = self._select(selector, request, tools)
        selected_at = time.perf_counter()
        context = PromptContext(
            request=request,
            tools=[s.tool for s in chosen if s.tool.kind == "tool"],
            skills=[s.tool for s in chosen if s.tool.kind == "skill"],
            workspace=self._workspace_listing(),
            history=self.log(session).history(),
            all_tools=selector.catalog.tools,
            values=values or {},
        )
        relay = _Relay(on_token)
        generated = self._wait(
            self._submit(self.generator.generate(context, relay.tokens())), relay=relay
        )
        generated_at = time.perf_counter()
        return Plan(
            request=request,
            session=session,
            values=values or {},
            tools=[
                ToolChoice(
                    qualname=s.tool.qualname,
                    score=s.score,
                    signature=s.tool.signature,
                    import_line=s.tool.import_line,
                )
                for s in chosen
            ],
            generated=generated,
            selection="named by the user" if tools else selector.mode,
            findings=check_guardrails(generated.code),
            strict=strict,
            timings_ms={
                "select": (selected_at - started) * 1000,
                "generate": (generated_at - selected_at) * 1000,
            },
        )

    def execute(
        self,
        code: str,
        *,
        session: str = DEFAULT_SESSION,
        timeout: float | None = None,
        on_stream: StreamCallback | None = None,
        plan: Plan | None = None,
    ) -> ExecutionResult:
        """Run code in the session's sandbox and record the turn. Interrupt with KeyboardInterrupt."""
        if timeout is not None and not timeout > 0:  # also refuses nan
            raise ConfigError(
                f"The time limit must be a positive number of seconds, not {timeout}."
            )
        if plan is not None and plan.blocked:
            raise GuardrailError(
                "The code was blocked by guardrails and did not run:\n"
                + "\n".join(f"  {f}" for f in plan.blocked)
            )
        relay = _Relay(on_stream)
        future = self._submit(self._execute(code, session, timeout, relay.streams()))
        result = self._wait(future, on_interrupt=lambda: self._interrupt(session), relay=relay)
        self.log(session).record(
            Record(
                request=plan.request if plan else "",
                code=code,
                summary=result.summary(),
                ok=result.ok,
                generator=plan.generated.generator if plan else "user",
                tools=plan.generated.tools_used if plan else [],
                prompt_tokens=plan.generated.prompt_tokens if plan else 0,
                completion_tokens=plan.generated.completion_tokens if plan else 0,
                timings_ms={**(plan.timings_ms if plan else {}), "execute": result.duration_ms},
            )
        )
        return result

    def run(
        self,
        request: str,
        *,
        session: str = DEFAULT_SESSION,
        tools: list[str] | None = None,
        timeout: float | None = None,
        approve: Callable[[Plan], bool] | None = None,
        on_stream: StreamCallback | None = None,
    ) -> Turn | None:
        """Plan, approve (by default, everything that guardrails let through), and execute."""
        plan = self.plan(request, session=session, tools=tools)
        if approve is not None and not approve(plan):
            return None
        result = self.execute(
            plan.code, session=session, timeout=timeout, on_stream=on_stream, plan=plan
        )
        return Turn(plan=plan, result=result)

    def resume(self, session: str = DEFAULT_SESSION, replay: bool = True) -> ResumeReport:
        """Take up a session an earlier kernel left in its log: the conversation comes back, and
        with ``replay`` the code that succeeded runs again (in order) to rebuild the variables."""
        log = self.log(session)
        records = log.load()
        report = ResumeReport(turns=len(records))
        log.adopt(records)
        if replay:
            self._call(self.pool.discard(session))
            for record in records:
                if not record.ok:
                    continue
                result = self._wait(self._submit(self._execute(record.code, session, None, None)))
                report.replayed += 1
                if not result.ok:
                    report.failures.append(
                        f"{record.request or record.code[:60]!r}: {result.summary()}"
                    )
        return report

    def save_skill(
        self,
        name: str,
        *,
        session: str = DEFAULT_SESSION,
        description: str = "",
        force: bool = False,
    ) -> Path:
        """Keep the session's last successful code as ``skills/<name>``."""
        from .skills import SkillError, check_name, save_skill

        check_name(name)
        done = [r for r in self.log(session).records if r.ok]
        if not done:
            raise SkillError("There is no successful cell in this session to save as a skill yet.")
        last = done[-1]
        return save_skill(
            self.settings.skills_dir, name, last.code, description, last.request, force=force
        )

    def reset(self, session: str = DEFAULT_SESSION) -> None:
        """A fresh interpreter for the session; the workspace stays as it is."""
        self._call(self.pool.discard(session))
        self._logs.pop(session, None)

    def pool_status(self) -> PoolStatus:
        return self.pool.status()

    def wait_ready(self, timeout: float = 60.0) -> PoolStatus:
        self._call(self.pool.wait_ready(timeout))
        return self.pool.status()

    # --- internals -----------------------------------------------------------------------------

    async def _execute(
        self, code: str, session: str, timeout: float | None, on_stream: StreamCallback | None
    ) -> ExecutionResult:
        sandbox = await self.pool.lease(session)
        limit = self.settings.sandbox.timeout if timeout is None else timeout
        result = await sandbox.execute(code, timeout=limit, on_stream=on_stream)
        reason = None
        if result.error is not None and result.error.kind in _REPLACEABLE:
            reason = {"timeout": "time limit", "limit": "resource limit"}.get(
                result.error.kind, "the sandbox stopped"
            )
        elif result.strays:
            reason = f"the code left {result.strays} process(es) running"
        elif not sandbox.alive:
            reason = "the sandbox stopped"
        if reason is not None:
            await self.pool.discard(session)
            result.notices.append(
                f"This session now has a fresh sandbox ({reason}): variables from earlier "
                "cells are gone; files in /workspace are kept."
            )
        missing = packages.missing(self.settings)
        if missing and result.error is not None and result.error.ename == "ModuleNotFoundError":
            result.notices.append(
                f"The sandbox packages {', '.join(missing)} are not installed yet: run "
                "`python -m cemcp_kernel sandbox-packages`."
            )
        if result.truncated_chars:
            result.notices.append(
                f"Output was cut at {self.settings.sandbox.max_output_bytes:,} characters; "
                f"{result.truncated_chars:,} more were dropped."
            )
        return result

    async def _interrupt(self, session: str) -> None:
        sandbox = self.pool.leased(session)
        if sandbox is not None:
            await sandbox.interrupt()

    def _wait(
        self,
        future: concurrent.futures.Future[T],
        on_interrupt: Callable[[], Coroutine[Any, Any, None]] | None = None,
        relay: _Relay | None = None,
    ) -> T:
        """Wait for the engine, delivering relayed callbacks on this thread as they come.

        On KeyboardInterrupt the work is stopped (``on_interrupt``) and what it made is returned;
        a second interrupt, or one with nothing to stop, raises.
        """
        deadline: float | None = None
        while True:
            try:
                if relay is not None:
                    relay.drain()
                return future.result(timeout=_POLL_S if relay is not None else None)
            except concurrent.futures.TimeoutError:
                if deadline is not None and time.monotonic() > deadline:
                    future.cancel()
                    raise KeyboardInterrupt from None
            except KeyboardInterrupt:
                if on_interrupt is None or deadline is not None:
                    future.cancel()
                    raise
                self._submit(on_interrupt())
                deadline = time.monotonic() + INTERRUPT_GRACE_S + 5
                relay = relay or _Relay(None)
            finally:
                if relay is not None and future.done():
                    relay.drain()

    def _workspace_listing(self) -> list[str]:
        root = self.settings.workspace_dir
        try:
            entries = sorted(p for p in root.iterdir() if p.name not in ("sessions", ".gitkeep"))
        except OSError:
            return []
        lines = [_describe_path(p, root) for p in entries[:_WORKSPACE_LISTED]]
        if len(entries) > _WORKSPACE_LISTED:
            lines.append(f"... and {len(entries) - _WORKSPACE_LISTED} more")
        return lines


def _describe_path(path: Path, root: Path) -> str:
    """One listing line; symlinks are not followed (the sandbox may point them at host files)."""
    name = "/workspace/" + str(path.relative_to(root))
    try:
        info = path.lstat()
    except OSError:
        return name
    if stat.S_ISLNK(info.st_mode):
        return f"{name} (symlink)"
    return f"{name}/" if stat.S_ISDIR(info.st_mode) else f"{name} ({info.st_size:,} bytes)"


async def _finish_loop() -> None:
    """End what is still running on the loop, as asyncio.run does: work that was under way when
    the engine closed (a probe, a sandbox still starting) cleans up instead of being dropped."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=10)
    loop = asyncio.get_running_loop()
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()


class _Relay:
    """Carries callbacks from the engine's thread to the waiting caller's thread.

    Display code (ipykernel output, widgets) belongs to the thread that runs the cell, so
    streamed output and model tokens are queued here and delivered by :meth:`Engine._wait`.
    """

    def __init__(self, callback: Callable[..., None] | None) -> None:
        self.callback = callback
        self.queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()

    def tokens(self) -> Callable[[str], None] | None:
        return None if self.callback is None else (lambda a: self.queue.put((a,)))

    def streams(self) -> Callable[[str, str], None] | None:
        return None if self.callback is None else (lambda a, b: self.queue.put((a, b)))

    def drain(self) -> None:
        if self.callback is None:
            return
        while True:
            try:
                args = self.queue.get_nowait()
            except queue.Empty:
                return
            self.callback(*args)
