"""Where cemcp keeps its own files: the user cache, and data shipped with the package."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """Per-user cache (probe results, parsed tool files, embeddings); safe to delete."""
    if explicit := os.environ.get("CEMCP_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "cemcp"


def data_dir(name: str) -> Path:
    """A top-level folder of the project (``kernelspec``, ``servers``...), from a checkout or a wheel."""
    checkout = PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    return PACKAGE / "_data" / name
