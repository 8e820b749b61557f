"""Sandboxes: backends behind one protocol, the agent they run, and the pool that leases them."""

from __future__ import annotations

from ..config import Settings
from ..errors import SandboxUnavailable
from .backend import Sandbox
from .channel import ToolHandler
from .pool import SandboxFactory


def make_sandbox_factory(settings: Settings, tool_handler: ToolHandler | None = None) -> SandboxFactory:
    """A factory for the configured backend; ``auto`` means the strongest one that works here."""
    backend = settings.sandbox.backend
    if backend in ("auto", "bubblewrap"):
        from .bubblewrap import BubblewrapSandbox

        def bubblewrap() -> Sandbox:
            return BubblewrapSandbox(settings, tool_handler)

        return bubblewrap
    raise SandboxUnavailable(f"The sandbox backend {backend!r} is not available yet.")
