from __future__ import annotations

from datetime import datetime, timezone
from typing import TypedDict

from ._paths import inside, relative

_LIMIT = 1000


class FileInfo(TypedDict):
    path: str
    type: str
    bytes: int
    modified: str


def list_files(path: str = ".", pattern: str = "*", recursive: bool = False) -> list[FileInfo]:
    """List files and folders under a folder of /workspace, sorted by path.

    pattern is a glob such as '*.csv'; recursive=True looks in subfolders too. Each entry is
    {'path' (relative to /workspace), 'type' ('file' or 'dir'), 'bytes', 'modified' (ISO 8601,
    UTC)}. At most 1000 entries.

    Example: list_files("reports", pattern="*.csv")
    """
    folder = inside(path)
    if not folder.is_dir():
        raise NotADirectoryError(f"{path!r} is not a folder in /workspace")
    found = folder.rglob(pattern) if recursive else folder.glob(pattern)
    entries: list[FileInfo] = []
    for item in sorted(found):
        try:
            item = inside(item)
            info = item.stat()
        except (PermissionError, OSError):
            continue  # a link out of the workspace, or gone meanwhile
        entries.append(
            {
                "path": relative(item),
                "type": "dir" if item.is_dir() else "file",
                "bytes": 0 if item.is_dir() else info.st_size,
                "modified": datetime.fromtimestamp(info.st_mtime, timezone.utc).isoformat(),
            }
        )
        if len(entries) >= _LIMIT:
            break
    return entries
