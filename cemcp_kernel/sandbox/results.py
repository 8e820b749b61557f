"""What one execution in a sandbox gives back, typed, whatever the backend."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

ErrorKind = Literal["user", "timeout", "interrupted", "limit", "sandbox"]


class Table(BaseModel):
    """Tabular data: the first rows that crossed from the sandbox, and how many there are."""

    columns: list[str]
    rows: list[list[Any]]
    total: int

    @property
    def capped(self) -> bool:
        return self.total > len(self.rows)


class Value(BaseModel):
    """The value of the cell's last expression: a table, an image (base64 PNG), plain JSON
    data, and always a bounded repr."""

    type: str
    repr: str
    data: Any = None
    is_json: bool = False
    table: Table | None = None
    png: str | None = None


class ErrorInfo(BaseModel):
    """An exception raised by the code, or a failure of the sandbox around it."""

    kind: ErrorKind = "user"
    ename: str
    evalue: str
    traceback: str = ""
    lineno: int | None = None


class ToolCallRecord(BaseModel):
    """One call the code made to a live MCP server through the bridge."""

    server: str
    tool: str
    ok: bool
    duration_ms: float
    error: str | None = None


class ExecutionResult(BaseModel):
    """Everything the code produced; ``notices`` are cemcp's own remarks (caps, restarts)."""

    value: Value | None = None
    stdout: str = ""
    stderr: str = ""
    error: ErrorInfo | None = None
    duration_ms: float = 0.0
    truncated_chars: int = 0
    strays: int = 0  # processes the code left running
    images: list[str] = Field(default_factory=list)  # base64 PNGs of figures the code drew
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list)
    sandbox: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def from_agent(cls, message: dict[str, Any], stdout: str, stderr: str) -> ExecutionResult:
        value = message.get("value")
        error = message.get("error")
        return cls(
            value=_value(value) if value else None,
            stdout=stdout,
            stderr=stderr,
            error=ErrorInfo(**error) if error else None,
            duration_ms=float(message.get("duration_ms", 0.0)),
            truncated_chars=int(message.get("truncated", 0)),
            strays=int(message.get("strays", 0)),
            images=[str(i) for i in message.get("images", [])],
        )

    def summary(self, limit: int = 300) -> str:
        """A short description for logs and for the model's next turn; never the raw data."""
        if self.error is not None:
            text = f"error {self.error.ename}: {self.error.evalue}"
        elif self.value is not None and self.value.table is not None:
            table = self.value.table
            text = f"{self.value.type}: table of {table.total} rows, columns {', '.join(table.columns)}"
        elif self.value is not None:
            text = f"{self.value.type}: {self.value.repr}"
        elif self.stdout:
            text = f"printed: {self.stdout}"
        else:
            text = "no output"
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(raw: dict[str, Any]) -> Value:
    return Value(
        type=str(raw.get("type", "")),
        repr=str(raw.get("repr", "")),
        data=raw.get("data"),
        is_json="data" in raw,
        table=Table.model_validate(raw["table"]) if raw.get("table") else None,
        png=raw.get("png"),
    )
