"""Where cemcp keeps its own files: the user cache, and data shipped with the package."""

from __future__ import annotations

import errno
import os
import stat
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
    """Open the regular file ``root/parts...`` without following a symlink below ``root``.

    The sandbox can write anything under the workspace: symlinks to host files, FIFOs that would
    block the host forever, devices. The host must never be led out of the folder it meant to
    touch, nor made to wait: the file is opened non-blocking and must be a regular file. Missing
    folders are created when ``flags`` include ``O_CREAT``. Raises OSError (ELOOP for a symlink).
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
        fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode, dir_fd=folder)
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", "/".join(parts))
    os.set_blocking(fd, True)
    return fd


def ensure_workspace(path: Path) -> Path:
    """The workspace folder, created when only its last part is missing (a typo in a path is
    reported, not turned into a new tree of folders)."""
    if path.is_dir():
        return path
    from .errors import SandboxError

    if path.exists():
        raise SandboxError(f"The workspace {path} is not a folder: set workspace_dir to a folder.")
    if not path.parent.is_dir():
        raise SandboxError(
            f"The workspace {path} does not exist, nor does {path.parent}: create it, or set "
            "workspace_dir to an existing folder."
        )
    path.mkdir()
    return path
