from __future__ import annotations

from ._paths import inside


def read_file(path: str, max_bytes: int = 1_000_000) -> str:
    """Read a text file of /workspace (UTF-8; undecodable bytes become U+FFFD).

    A file larger than max_bytes is refused rather than cut: pass a larger max_bytes, or use
    search_files to find the lines you need.

    Example: read_file("notes/todo.txt")
    """
    file = inside(path)
    if not file.is_file():
        raise FileNotFoundError(f"no file {path!r} in /workspace")
    size = file.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path!r} is {size:,} bytes, more than max_bytes={max_bytes:,}")
    return file.read_text(encoding="utf-8", errors="replace")
