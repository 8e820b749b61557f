"""``servers add | import | refresh | list | remove``: the tool tree's live servers.

Adding connects to the server with the official ``mcp`` SDK, lists its tools and writes one
wrapper module per tool next to ``server.json``. Literal ``env``/``headers`` values never reach
the tool tree: they move to the project's ``.env`` and server.json keeps ``${VAR}``. Nothing is
written unless the server answered; a refresh of an unchanged server rewrites no file.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field

from ..bridge.config import (
    CONFIG_FILE,
    IDENTIFIER,
    HttpServer,
    ServerConfig,
    append_env,
    load_server,
    move_secrets,
    parse_server,
    resolve,
    write_if_changed,
    write_server,
)
from ..config import Settings
from ..errors import McpServerError
from . import pysource
from .render import ToolInfo, generated, render_server


class ServerReport(BaseModel):
    """What one add or refresh did."""

    name: str
    origin: str = ""
    tools: list[str] = Field(default_factory=list)
    written: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    env_added: list[str] = Field(default_factory=list)

    def text(self) -> str:
        tools = ", ".join(self.tools) or "no tools"
        lines = [f"servers/{self.name}: {len(self.tools)} tools from {self.origin} ({tools})"]
        if self.written or self.removed:
            changes = [f"wrote {f}" for f in self.written] + [f"removed {f}" for f in self.removed]
            lines.append("  " + "; ".join(changes))
        else:
            lines.append("  unchanged: no file rewritten")
        if self.env_added:
            lines.append(
                f"  moved {', '.join(self.env_added)} to .env (server.json references them)"
            )
        return "\n".join(lines)


class ServerEntry(BaseModel):
    """One folder of the tool tree, as ``servers list`` shows it."""

    name: str
    kind: str  # native | stdio | http | broken
    target: str = ""
    tools: int = 0
    problem: str | None = None

    def text(self) -> str:
        detail = f"  ({self.problem})" if self.problem else ""
        return f"{self.name:16} {self.kind:7} {self.tools:3} tools  {self.target}{detail}"


def check_name(name: str) -> str:
    if not IDENTIFIER.match(name):
        suggestion = pysource.identifier(name, set(), avoid_builtins=False)
        raise McpServerError(
            f"{name!r} cannot be a server name: it becomes a Python package name. "
            f"Use letters, digits and _, starting with a letter (e.g. {suggestion})."
        )
    return name


async def fetch_tools(
    name: str, config: ServerConfig, project_dir: Path, pending: Mapping[str, str] | None = None
) -> tuple[str, list[ToolInfo]]:
    """Start the server, list its tools, stop it: ``("name version", tools)``."""
    from ..bridge.session import LiveSession

    live = LiveSession(name, resolve(config, name, project_dir, pending))
    try:
        await live.start()
        info = live.server_info
        origin = f"{info.name} {info.version}" if info else name
        return origin, [ToolInfo.from_mcp(tool) for tool in live.tools.values()]
    finally:
        await live.close()


def add(settings: Settings, name: str, config: ServerConfig) -> ServerReport:
    """Connect, list, write wrappers and server.json; secrets go to the project's .env."""
    check_name(name)
    folder = settings.servers_dir / name
    _check_folder(folder)
    env_file = settings.project_dir / ".env"
    config, pending = move_secrets(config, name, env_file)
    origin, tools = asyncio.run(fetch_tools(name, config, settings.project_dir, pending))
    if pending:
        append_env(env_file, pending)
    report = _write(folder, name, origin, tools)
    if write_server(folder, config):
        report.written.append(CONFIG_FILE)
    report.env_added = sorted(pending)
    return report


def refresh(settings: Settings, name: str) -> ServerReport:
    """Regenerate a server's wrappers from the live server; unchanged files keep their mtime."""
    check_name(name)
    folder = settings.servers_dir / name
    config = load_server(folder)
    origin, tools = asyncio.run(fetch_tools(name, config, settings.project_dir))
    return _write(folder, name, origin, tools)


def import_file(
    settings: Settings, path: Path, only: list[str] | None = None
) -> list[ServerReport | McpServerError]:
    """Add every server of a desktop client's ``{"mcpServers": {...}}`` file.

    A server that fails is reported and the others are still added.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise McpServerError(f"{path} cannot be read as JSON: {exc}") from None
    servers = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpServerError(
            f'{path} has no "mcpServers" object; expected {{"mcpServers": {{"name": '
            '{"command": ..., "args": [...]}}}, as Claude Desktop, Cursor and others write it.'
        )
    results: list[ServerReport | McpServerError] = []
    taken: set[str] = set()  # names given in this file; importing it again updates the same
    for key, entry in servers.items():
        name = (
            key if IDENTIFIER.match(key) else pysource.identifier(key, taken, avoid_builtins=False)
        )
        taken.add(name)
        if only and key not in only:
            continue
        if isinstance(entry, dict) and entry.get("disabled"):
            continue
        try:
            config = parse_server(entry, f"{path.name}: mcpServers.{key}")
            results.append(add(settings, name, config))
        except McpServerError as exc:
            results.append(McpServerError(f"{key}: {exc}"))
    return results


def remove(settings: Settings, name: str) -> list[str]:
    """Delete a server's generated files and server.json; files cemcp did not write stay."""
    check_name(name)
    folder = settings.servers_dir / name
    if not folder.is_dir():
        raise McpServerError(f"there is no folder servers/{name}")
    removed = []
    for path in sorted(folder.iterdir()):
        if path.name == CONFIG_FILE or (path.suffix == ".py" and _is_generated(path)):
            path.unlink()
            removed.append(path.name)
    cache = folder / "__pycache__"
    if cache.is_dir():
        shutil.rmtree(cache, ignore_errors=True)
    if not any(folder.iterdir()):
        folder.rmdir()
    return removed


def list_servers(settings: Settings) -> list[ServerEntry]:
    root = settings.servers_dir
    entries = []
    if not root.is_dir():
        return entries
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if not IDENTIFIER.match(folder.name):
            continue
        tools = len([p for p in folder.glob("*.py") if not p.name.startswith("_")])
        if not (folder / CONFIG_FILE).exists():
            entries.append(ServerEntry(name=folder.name, kind="native", tools=tools))
            continue
        try:
            config = load_server(folder)
        except McpServerError as exc:
            entries.append(
                ServerEntry(name=folder.name, kind="broken", tools=tools, problem=str(exc))
            )
            continue
        entries.append(
            ServerEntry(name=folder.name, kind=_kind(config), target=describe(config), tools=tools)
        )
    return entries


_SECRET_WORDS = re.compile(r"key|token|secret|passw|auth|credential", re.I)


def describe(config: ServerConfig) -> str:
    """How the server is reached, without any value that could be a credential: header and
    environment names only, no URL query or user info, and the argument after a flag whose
    name sounds secret (``--api-key X``, ``--token=X``) hidden."""
    if isinstance(config, HttpServer):
        url = urlsplit(config.url)
        host = url.hostname or ""
        shown = urlunsplit(
            (url.scheme, host + (f":{url.port}" if url.port else ""), url.path, "", "")
        )
        headers = f" (headers: {', '.join(sorted(config.headers))})" if config.headers else ""
        return shown + (" (query hidden)" if url.query else "") + headers
    words: list[str] = []
    hide_next = False
    for arg in config.args:
        flag, sep, _ = arg.partition("=")
        if hide_next:
            words.append("***")
        elif sep and flag.startswith("-") and _SECRET_WORDS.search(flag):
            words.append(f"{flag}=***")
        else:
            words.append(arg)
        hide_next = arg.startswith("-") and not sep and bool(_SECRET_WORDS.search(arg))
    env = f" (env: {', '.join(sorted(config.env))})" if config.env else ""
    return " ".join([config.command, *words]) + env


def _kind(config: ServerConfig) -> str:
    return "http" if isinstance(config, HttpServer) else "stdio"


def _write(folder: Path, name: str, origin: str, tools: list[ToolInfo]) -> ServerReport:
    files = render_server(name, tools, origin)
    report = ServerReport(name=name, origin=origin, tools=sorted(t.name for t in tools))
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, text in sorted(files.items()):
        if write_if_changed(folder / file_name, text):
            report.written.append(file_name)
    for path in sorted(folder.glob("*.py")):
        if path.name not in files and _is_generated(path):
            path.unlink()
            report.removed.append(path.name)
    return report


def _check_folder(folder: Path) -> None:
    if not folder.is_dir():
        return
    foreign = [p.name for p in sorted(folder.glob("*.py")) if not _is_generated(p)]
    if foreign:
        raise McpServerError(
            f"servers/{folder.name} holds tool files cemcp did not generate "
            f"({', '.join(foreign)}); choose another name for the live server."
        )


def _is_generated(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as handle:
            return generated(handle.read(200))
    except (OSError, UnicodeDecodeError):
        return False


def parse_pairs(pairs: list[str], what: str) -> dict[str, str]:
    """``K=V`` command-line pairs as a dict; a clear error for anything else."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise McpServerError(f"{what} {pair!r} must look like NAME=VALUE")
        out[key.strip()] = value
    return out


def config_from_args(
    command: list[str], url: str | None, headers: list[str], env: list[str]
) -> ServerConfig:
    data: dict[str, Any]
    if url and command:
        raise McpServerError("give either --url URL or -- COMMAND ARGS..., not both")
    if url:
        data = {"url": url, "headers": parse_pairs(headers, "--header")}
        if env:
            raise McpServerError("--env is for servers started with a command; use --header")
    elif command:
        data = {"command": command[0], "args": command[1:], "env": parse_pairs(env, "--env")}
        if headers:
            raise McpServerError("--header is for --url servers; use --env for a command")
    else:
        raise McpServerError(
            "say how to start the server: servers add NAME -- COMMAND ARGS... "
            "(e.g. -- mcp-server-time), or servers add NAME --url URL"
        )
    return parse_server(data, "the command line")
