"""Arguments of the magics: ``shlex``-split, parsed by argparse, validated into pydantic models."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from IPython.core.error import UsageError
from pydantic import BaseModel, Field, ValidationError, field_validator


class CellArgs(BaseModel):
    """Flags of a ``%%mcp`` cell."""

    yes: bool = False
    code: bool = False
    insert: bool = False
    strict: bool = False
    timeout: float | None = Field(None, gt=0)
    tools: list[str] | None = None
    output: str | None = None

    @field_validator("output")
    @classmethod
    def _identifier(cls, value: str | None) -> str | None:
        if value is not None and not value.isidentifier():
            raise ValueError(f"{value!r} is not a valid variable name")
        return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit the kernel
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage()}")


def _cell_parser() -> _Parser:
    parser = _Parser(prog="%%mcp", add_help=False)
    parser.add_argument("-y", "--yes", action="store_true", help="run without review")
    parser.add_argument("--code", action="store_true", help="the cell is Python: run it as is")
    parser.add_argument("--insert", action="store_true", help="put the code in the next cell")
    parser.add_argument("--strict", action="store_true", help="guardrail warnings block too")
    parser.add_argument("--timeout", type=float, help="seconds the code may run")
    parser.add_argument("--tools", help="comma-separated tools to use, e.g. calculator.add")
    parser.add_argument("-o", "--output", help="store the result in this variable")
    return parser


def parse_cell_args(line: str) -> CellArgs:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%%mcp: cannot read the options: {exc}") from None
    namespace = _cell_parser().parse_args(words)
    values = vars(namespace)
    if values["tools"] is not None:
        values["tools"] = [t.strip() for t in values["tools"].split(",") if t.strip()]
    try:
        return CellArgs(**values)
    except ValidationError as exc:
        problems = "; ".join(f"{e['loc'][0]}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"%%mcp: {problems}") from None


def parse_assignments(line: str) -> dict[str, str]:
    """``key=value`` pairs of ``%mcp_config``."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%mcp_config: cannot read the settings: {exc}") from None
    pairs = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise UsageError(f"%mcp_config: expected key=value, got {word!r}")
        pairs[key.strip()] = value
    return pairs


class SkillArgs(BaseModel):
    """``%mcp_skill save NAME [--description TEXT] [--force]``."""

    name: str
    description: str = ""
    force: bool = False


def parse_skill_args(line: str) -> SkillArgs:
    parser = _Parser(prog="%mcp_skill", add_help=False)
    parser.add_argument("action", choices=["save"])
    parser.add_argument("name")
    parser.add_argument("--description", default="")
    parser.add_argument("--force", action="store_true")
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%mcp_skill: cannot read the arguments: {exc}") from None
    values = vars(parser.parse_args(words))
    values.pop("action")
    return SkillArgs(**values)


def parse_resume_args(line: str) -> bool:
    """True to replay the saved code (the default), False for ``--no-replay``."""
    parser = _Parser(prog="%mcp_resume", add_help=False)
    parser.add_argument("--no-replay", action="store_true")
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%mcp_resume: cannot read the options: {exc}") from None
    return not parser.parse_args(words).no_replay
