"""A notebook session's history: what was asked, the code that ran, a short result summary.

Kept in memory for the model's next turn and appended to ``<workspace>/sessions/<id>.jsonl``
so that a session can be resumed after a kernel restart.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

from pydantic import BaseModel, Field

from .generation.prompt import Turn
from .paths import open_in

HISTORY_TURNS = 6
MAX_LOG_CHARS = 20_000_000


class Record(BaseModel):
    """One line of the session log; ``run`` tells the kernels that wrote to it apart."""

    run: str = ""
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


def session_file_name(session: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", session).strip("._") or "default"
    return f"{safe}.jsonl"


class SessionLog:
    """The log lives in the workspace, which the sandbox can change: it is opened through
    :func:`open_in`, so a symlink planted there cannot make the host write elsewhere."""

    def __init__(self, workspace: Path, session: str) -> None:
        self.session = session
        self.run = uuid.uuid4().hex[:12]
        self.workspace = workspace
        self.name = session_file_name(session)
        self.records: list[Record] = []

    def record(self, record: Record) -> None:
        record.run = self.run
        self.records.append(record)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd = open_in(self.workspace, "sessions", self.name, flags=flags)
            with os.fdopen(fd, "a", encoding="utf-8") as handle:
                handle.write(record.model_dump_json() + "\n")
        except OSError:
            pass  # the in-memory history still works; a full disk must not fail the cell

    def adopt(self, records: list[Record]) -> None:
        """Make an earlier run's turns the start of this run (in memory and in the log), so
        that resuming again later finds the whole session."""
        current, self.records = self.records, []
        for record in [*records, *current]:
            self.record(record.model_copy())

    def history(self, limit: int = HISTORY_TURNS) -> list[Turn]:
        """Recent successful turns, as the model sees them."""
        ok = [r for r in self.records if r.ok][-limit:]
        return [Turn(request=r.request, code=r.code, result=r.summary) for r in ok]

    def load(self) -> list[Record]:
        """The turns of the latest earlier run of this session (the kernel before a restart);
        unreadable lines are skipped."""
        try:
            fd = open_in(self.workspace, "sessions", self.name, flags=os.O_RDONLY)
        except OSError:
            return []
        with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
            text = handle.read(MAX_LOG_CHARS)  # the sandbox can grow this file at will
        records = []
        for line in text.splitlines():
            try:
                records.append(Record.model_validate_json(line))
            except ValueError:
                continue
        earlier = [r for r in records if r.run != self.run]
        if not earlier:
            return []
        last = earlier[-1].run
        return [r for r in earlier if r.run == last]
