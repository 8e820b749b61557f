"""Sandboxes: backends behind one protocol, the agent they run, and the pool that leases them."""

from __future__ import annotations

import asyncio

from ..config import Settings
from ..errors import SandboxUnavailable
from .backend import AgentSandbox, Sandbox
from .channel import ToolHandler


def backend_class(name: str) -> type[AgentSandbox]:
    if name == "microsandbox":
        from .microsandbox import MicrosandboxSandbox

        return MicrosandboxSandbox
    if name == "bubblewrap":
        from .bubblewrap import BubblewrapSandbox

        return BubblewrapSandbox
    raise SandboxUnavailable(
        f"Unknown sandbox backend {name!r}; use auto, microsandbox or bubblewrap."
    )


class SandboxFactory:
    """Makes sandboxes of the configured backend; ``auto`` is resolved by the probe on first use,
    on the engine's thread, so choosing a backend never delays a kernel's start."""

    def __init__(self, settings: Settings, tool_handler: ToolHandler | None = None) -> None:
        self.settings = settings
        self.tool_handler = tool_handler
        self.backend: str | None = None
        self._lock: asyncio.Lock | None = None

    async def __call__(self) -> Sandbox:
        if self.backend is None:
            from .probe import choose

            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self.backend is None:
                    self.backend = await choose(self.settings)
        return backend_class(self.backend)(self.settings, self.tool_handler)
