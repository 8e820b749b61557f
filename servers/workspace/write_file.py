from __future__ import annotations

from typing import TypedDict

from ._paths import inside, relative


class Written(TypedDict):
    path: str
    bytes: int


def write_file(path: str, content: str, append: bool = False) -> Written:
    """Write text to a file of /workspace (UTF-8), creating its folders; append=True adds to it.

    The notebook's host sees the file at once, in the project's workspace folder.

    Example: write_file("reports/summary.md", "# Summary\\n")
    """
    file = inside(path)
    if file.is_dir():
        raise IsADirectoryError(f"{path!r} is a folder")
    file.parent.mkdir(parents=True, exist_ok=True)
    with file.open("a" if append else "w", encoding="utf-8") as handle:
        handle.write(content)
    return {"path": relative(file), "bytes": file.stat().st_size}
