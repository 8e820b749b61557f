"""Every workspace tool resolves paths here: inside /workspace, or refused."""

from __future__ import annotations

from pathlib import Path

ROOT = Path("/workspace")


def inside(path: str | Path) -> Path:
    """``path`` (relative to /workspace, or absolute under it) with links followed.

    Raises PermissionError for anything that ends up outside /workspace: ``..``, absolute
    paths elsewhere, and symbolic links that point out.
    """
    given = Path(path)
    resolved = (given if given.is_absolute() else ROOT / given).resolve()
    try:
        resolved.relative_to(ROOT)
    except ValueError:
        raise PermissionError(
            f"{str(path)!r} is outside /workspace; the workspace tools only use files under "
            "/workspace (give a path relative to it, like 'data/report.csv')"
        ) from None
    return resolved


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path != ROOT else "."
