"""The cemcp IPython extension: ``%load_ext magics`` gives ``%%mcp`` in any IPython kernel."""

from __future__ import annotations

import atexit
from typing import Any

_magics: Any = None


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics and start the engine, whose sandboxes warm up in the background."""
    global _magics
    from .magics import McpMagics

    if _magics is not None:
        return
    _magics = McpMagics(ipython)
    ipython.register_magics(_magics)
    atexit.register(unload_ipython_extension, ipython)
    _magics.start_engine()


def unload_ipython_extension(ipython: Any) -> None:
    global _magics
    if _magics is not None:
        _magics.close()
        _magics = None
