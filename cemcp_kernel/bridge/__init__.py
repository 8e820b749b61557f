"""The MCP bridge: live MCP sessions on the host, called by tool wrappers in the sandbox."""

from __future__ import annotations

from .host import Bridge, ServerStatus

__all__ = ["Bridge", "ServerStatus"]
