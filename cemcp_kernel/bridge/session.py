"""One live MCP session per server, owned by a task that opens and closes it.

anyio (which the ``mcp`` SDK runs on) requires a context manager to be exited by the task that
entered it, so each session lives in its own runner task: it enters the transport and the
``ClientSession`` through an ``AsyncExitStack``, lists the tools, then waits until the connection
ends or it is told to stop, and always closes everything in ``finally`` — for stdio servers that
means the SDK's shutdown: stdin closed, then SIGTERM and SIGKILL to the server's process group.
Calls come from other tasks and share the session (the SDK correlates concurrent requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    Implementation,
    PaginatedRequestParams,
    Tool,
)

from ..errors import McpServerError
from .config import HttpServer, ServerConfig, StdioServer

START_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 10.0
_STDERR_KEEP = 8000
_CLIENT = Implementation(name="cemcp", version="0.1.0")


class StderrTail:
    """The last few KB a stdio server wrote to stderr, for error messages; bounded memory."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.errlog = os.fdopen(write_fd, "w")  # the child gets a copy at spawn
        self._reader = os.fdopen(read_fd, "rb", buffering=0)
        self._data = bytearray()
        self._transport: asyncio.ReadTransport | None = None

    async def start(self) -> None:
        tail = self

        class _Protocol(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                tail._data += data
                if len(tail._data) > 2 * _STDERR_KEEP:
                    del tail._data[:-_STDERR_KEEP]

        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.connect_read_pipe(_Protocol, self._reader)

    def spawned(self) -> None:
        """Drop our copy of the write end, so the pipe ends when the server does."""
        with contextlib.suppress(OSError):
            self.errlog.close()

    def text(self) -> str:
        return self._data[-_STDERR_KEEP:].decode("utf-8", "replace").strip()

    def close(self) -> None:
        self.spawned()
        if self._transport is not None:
            self._transport.close()
        else:
            with contextlib.suppress(OSError):
                self._reader.close()


class _WatchedStream:
    """The transport's read stream, telling the session when the server's side has ended.

    The SDK notices a closed connection only when a request is pending; this lets an idle
    session that lost its server be restarted before the next call instead of failing it.
    """

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    async def __aenter__(self) -> _WatchedStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        try:
            return await self._inner.__aexit__(*exc)
        finally:
            self._ended.set()

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._ended.set()
            raise

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended.set()
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class LiveSession:
    """A running MCP server and the client session talking to it."""

    def __init__(self, name: str, config: ServerConfig) -> None:
        self.name = name
        self.config = config
        self.session: ClientSession | None = None
        self.tools: dict[str, Tool] = {}
        self.server_info: Implementation | None = None
        self.ended = asyncio.Event()
        self.stderr: StderrTail | None = StderrTail() if isinstance(config, StdioServer) else None
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._failure: BaseException | None = None

    @property
    def alive(self) -> bool:
        return self.session is not None and not self.ended.is_set()

    async def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the server, initialize, list its tools; McpServerError saying why not."""
        if self.stderr is not None:
            await self.stderr.start()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.get_running_loop().create_task(self._run(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise McpServerError(
                self._explain(f"did not finish starting within {timeout:g} s")
            ) from None
        except BaseException:
            await self.close()
            raise

    async def _run(self, ready: asyncio.Future[None]) -> None:
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with AsyncExitStack() as stack:
                    session = await stack.enter_async_context(self._connect())
                    result = await session.initialize()
                    self.server_info = result.server_info
                    self.tools = {tool.name: tool for tool in await list_tools(session)}
                    self.session = session
                    ready.set_result(None)
                    await self.ended.wait()
        except BaseException as exc:  # reported to start(); a running session just ends
            if not ready.done():
                ready.set_exception(McpServerError(self._explain(_startup_failure(exc))))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None
            self.ended.set()
            if self.stderr is not None:
                self.stderr.spawned()
            if not ready.done():
                ready.set_exception(McpServerError(self._explain("stopped while starting")))

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[ClientSession]:
        config = self.config
        async with AsyncExitStack() as stack:
            if isinstance(config, HttpServer):
                import httpx2

                client = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers=config.headers, timeout=httpx2.Timeout(30.0, read=300.0)
                    )
                )
                read, write = await stack.enter_async_context(
                    streamable_http_client(config.url, http_client=client)
                )
            else:
                assert self.stderr is not None
                params = StdioServerParameters(
                    command=config.command, args=config.args, env=config.env, cwd=config.cwd
                )
                read, write = await stack.enter_async_context(
                    stdio_client(params, errlog=self.stderr.errlog)
                )
                self.stderr.spawned()
            watched: Any = _WatchedStream(read, self.ended)
            yield await stack.enter_async_context(
                ClientSession(watched, write, client_info=_CLIENT)
            )

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> CallToolResult:
        """One tools/call; McpServerError when the call cannot complete."""
        session = self.session
        if session is None or self.ended.is_set():
            raise McpServerError(self._explain("is not running"))
        try:
            # The SDK enforces the time limit itself (no extra task per call, which costs).
            return await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise McpServerError(
                    f"did not answer within {timeout:g} s. Give it more time with "
                    "call_tool(..., timeout=SECONDS) or the tool_timeout setting."
                ) from None
            if exc.code == CONNECTION_CLOSED:
                await asyncio.sleep(0.1)  # let the server's last words reach the stderr tail
                raise McpServerError(
                    self._explain("stopped during the call (it may have crashed)")
                    + " The next call starts it again."
                ) from None
            raise McpServerError(f"the server answered with an error: {exc.message}") from None
        except RuntimeError as exc:  # the SDK's own checks, e.g. an output schema violation
            raise McpServerError(str(exc)) from None

    async def close(self) -> None:
        """Stop the session and the server; safe to call twice, bounded in time."""
        if self._scope is not None:
            self._scope.cancel()
        task = self._task
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT_S)
            if not done:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self.stderr is not None:
            self.stderr.close()

    def _explain(self, what: str) -> str:
        """``the MCP server 'x' <what>``, with its last stderr lines and a hint when they say
        the server was built for another version of the ``mcp`` package."""
        message = f"the MCP server {self.name!r} {what}."
        tail = self.stderr.text() if self.stderr is not None else ""
        if tail:
            lines = tail.splitlines()[-12:]
            message += "\nIts last output:\n  " + "\n  ".join(lines)
            if _looks_like_sdk_mismatch(tail):
                message += (
                    f"\nThis server seems to be written for another version of the `mcp` package "
                    f"(cemcp runs mcp {version('mcp')}). Install the server in its own "
                    f"environment (e.g. a separate venv, or `uvx`) and point `command` in "
                    f"servers/{self.name}/server.json at it."
                )
        return message


async def list_tools(session: ClientSession) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever is not followed forever
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _startup_failure(exc: BaseException) -> str:
    leaf = _first_leaf(exc)
    if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
        return "exited while starting"
    if isinstance(leaf, MCPError):
        return f"refused to start: {leaf.message}"
    if isinstance(leaf, asyncio.CancelledError):
        return "was stopped while starting"
    if isinstance(leaf, OSError):
        return f"could not be started: {leaf}"
    return f"could not be started: {type(leaf).__name__}: {leaf}"


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def _looks_like_sdk_mismatch(stderr: str) -> bool:
    markers = ("AttributeError", "ImportError", "ModuleNotFoundError", "TypeError")
    return "mcp" in stderr and any(marker in stderr for marker in markers)
