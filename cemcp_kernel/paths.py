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


def open_in(root: Path, *parts: str, flags: int, mode: int = 0o644) -> int:
    """Open ``root/parts...`` without following a symlink at any step below ``root``.

    The sandbox can write anything under the workspace, including symlinks to host files; the
    host must never be led by one out of the folder it meant to touch. Missing folders are
    created when ``flags`` include ``O_CREAT``. Raises OSError (ELOOP for a symlink).
    """
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            if flags & os.O_CREAT:
                try:
                    os.mkdir(part, 0o755, dir_fd=folder)
                except FileExistsError:
                    pass
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=folder)
    finally:
        os.close(folder)
