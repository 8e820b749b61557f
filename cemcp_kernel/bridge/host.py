"""The host's half of ``call_tool``: sandbox frames in, live MCP sessions out.

The sandbox names a server and a tool; the bridge finds ``servers/<server>/server.json``, keeps
one session per server (started on first use on the engine's loop, started again after it
dies), forwards the call with a time limit and answers with plain JSON. Credentials in
``${VAR}`` references are resolved here and go only to the server process or HTTP request.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..config import Settings
from ..errors import McpServerError
from .config import IDENTIFIER, load_server, resolve

if TYPE_CHECKING:
    from .session import LiveSession


class ServerStatus(BaseModel):
    name: str
    running: bool
    tools: int
    server: str = ""


class Bridge:
    """Implements the sandbox channel's ``ToolHandler``: ``await bridge.call(server, tool, ...)``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._sessions: dict[str, LiveSession] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    async def call(
        self, server: str, tool: str, arguments: dict[str, Any], timeout: float | None = None
    ) -> Any:
        """The tool's result as plain JSON; raises McpServerError with a message for the sandbox."""
        from .results import ToolFailed, tool_value  # the mcp SDK loads on first use

        label = f"{server}.{tool}"
        limit = float(timeout) if timeout else self.settings.tool_timeout
        try:
            session = await self.session(server)
            if tool not in session.tools:
                known = ", ".join(sorted(session.tools)) or "none"
                raise McpServerError(
                    f"the MCP server {server!r} has no tool {tool!r} (it has: {known}). "
                    f"Regenerate its wrappers with `python -m cemcp_kernel servers refresh {server}`."
                )
            result = await session.call(tool, arguments, limit)
            return tool_value(result)
        except ToolFailed as exc:
            raise McpServerError(f"{label} failed: {exc}") from None
        except McpServerError as exc:
            raise McpServerError(f"{label}: {exc}") from None

    async def session(self, server: str) -> LiveSession:
        """The server's running session, started (again) when there is none."""
        from .session import LiveSession

        if self._closed:
            raise McpServerError("the MCP bridge is closed")
        if not IDENTIFIER.match(server):
            raise McpServerError(f"{server!r} is not a server name")
        live = self._sessions.get(server)
        if live is not None and live.alive:
            return live
        lock = self._locks.setdefault(server, asyncio.Lock())
        async with lock:
            live = self._sessions.get(server)
            if live is not None and live.alive:
                return live
            if live is not None:
                await live.close()
                self._sessions.pop(server, None)
            folder = self.settings.servers_dir / server
            if not folder.is_dir():
                raise McpServerError(f"there is no folder servers/{server}")
            config = resolve(load_server(folder), server, self.settings.project_dir)
            live = LiveSession(server, config)
            await live.start()
            if self._closed:  # closed while this one was starting
                await live.close()
                raise McpServerError("the MCP bridge is closed")
            self._sessions[server] = live
            return live

    def status(self) -> list[ServerStatus]:
        return [
            ServerStatus(
                name=name,
                running=live.alive,
                tools=len(live.tools),
                server=f"{live.server_info.name} {live.server_info.version}"
                if live.server_info
                else "",
            )
            for name, live in sorted(list(self._sessions.items()))
        ]

    async def close(self) -> None:
        """Stop every session and its server process. Safe to call twice."""
        self._closed = True
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(live.close() for live in sessions), return_exceptions=True)
