"""A notebook session's history: what was asked, the code that ran, a short result summary.

Kept in memory for the model's next turn and appended to ``<workspace>/sessions/<id>.jsonl``
so that a session can be resumed after a kernel restart.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from pydantic import BaseModel, Field

from .generation.prompt import Turn

HISTORY_TURNS = 6


class Record(BaseModel):
    """One line of the session log."""

    time: float = Field(default_factory=time.time)
    request: str
    code: str
    summary: str
    ok: bool
    generator: str = ""
    tools: list[str] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings_ms: dict[str, float] = Field(default_factory=dict)


def session_file(workspace: Path, session: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", session).strip("._") or "default"
    return workspace / "sessions" / f"{safe}.jsonl"


class SessionLog:
    def __init__(self, workspace: Path, session: str) -> None:
        self.session = session
        self.path = session_file(workspace, session)
        self.records: list[Record] = []

    def record(self, record: Record) -> None:
        self.records.append(record)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(record.model_dump_json() + "\n")
        except OSError:
            pass  # the in-memory history still works; a full disk must not fail the cell

    def history(self, limit: int = HISTORY_TURNS) -> list[Turn]:
        """Recent successful turns, as the model sees them."""
        ok = [r for r in self.records if r.ok][-limit:]
        return [Turn(request=r.request, code=r.code, result=r.summary) for r in ok]

    def load(self) -> list[Record]:
        """Records saved by an earlier kernel for this session; unreadable lines are skipped."""
        if not self.path.is_file():
            return []
        records = []
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                records.append(Record.model_validate_json(line))
            except ValueError:
                continue
        return records
