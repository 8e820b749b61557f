from __future__ import annotations

import re
from typing import TypedDict

from ._paths import inside, relative


class Match(TypedDict):
    path: str
    line: int
    text: str


def search_files(
    text: str,
    path: str = ".",
    pattern: str = "*",
    regex: bool = False,
    ignore_case: bool = True,
    max_results: int = 200,
) -> list[Match]:
    """Find lines containing text (or matching a regular expression) in files of /workspace.

    Looks in every file under path whose name matches the glob pattern (e.g. '*.md'), skipping
    files that are not UTF-8 text or larger than 10 MB. Each match is {'path', 'line' (from 1),
    'text'}.

    Example: search_files("TODO", pattern="*.py")
    """
    flags = re.IGNORECASE if ignore_case else 0
    matcher = re.compile(text if regex else re.escape(text), flags)
    folder = inside(path)
    candidates = [folder] if folder.is_file() else sorted(folder.rglob(pattern))
    matches: list[Match] = []
    for candidate in candidates:
        try:
            file = inside(candidate)
            if not file.is_file() or file.stat().st_size > 10_000_000:
                continue
            lines = file.read_text(encoding="utf-8").splitlines()
        except (PermissionError, OSError, UnicodeDecodeError):
            continue
        for number, line in enumerate(lines, 1):
            if matcher.search(line):
                matches.append({"path": relative(file), "line": number, "text": line[:500]})
                if len(matches) >= max_results:
                    return matches
    return matches
