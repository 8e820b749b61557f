"""Errors a user can act on. Each message says what happened and what to do next.

The magics show these as a short message instead of a traceback; anything else that escapes
is a bug in cemcp and is shown with its traceback.
"""

from __future__ import annotations


class CemcpError(Exception):
    """Base of every error that carries a user-facing message."""


class ConfigError(CemcpError):
    """A setting has a bad value or a config file cannot be read."""


class SelectionError(CemcpError):
    """A tool named by the user does not exist."""


class GenerationError(CemcpError):
    """No code could be produced for a request (no model, a failing endpoint, unusable replies)."""


class GuardrailError(CemcpError):
    """Generated code was blocked before review."""


class SandboxError(CemcpError):
    """A sandbox could not be started or died; the session gets a fresh one on the next cell."""


class SandboxUnavailable(SandboxError):
    """No backend that isolates code works on this host."""


class SandboxBusy(SandboxUnavailable):
    """A backend is held by something that passes (a lock another process holds): try again."""


class McpServerError(CemcpError):
    """A live MCP server is misconfigured, cannot be started, or failed a call."""
