"""cemcp: code execution with MCP, from Jupyter or from a script.

The public API is the :class:`Engine`; the kernel and the ``%%mcp`` magics are thin layers over it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
__all__ = ["Engine", "Plan", "Settings", "Turn", "__version__", "load_settings"]

if TYPE_CHECKING:
    from .config import Settings, load_settings
    from .engine import Engine, Plan, Turn


def __getattr__(name: str) -> object:
    # Lazy, so that `import cemcp_kernel` (the kernel's start path) stays cheap.
    if name in ("Engine", "Plan", "Turn"):
        from . import engine

        return getattr(engine, name)
    if name in ("Settings", "load_settings"):
        from . import config

        return getattr(config, name)
    raise AttributeError(name)
