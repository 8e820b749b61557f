"""``servers/<server>/server.json``: how to start a live MCP server, in the ``mcpServers`` shape.

stdio: ``{"command": ..., "args": [...], "env": {...}}``; streamable HTTP: ``{"url": ...,
"headers": {...}}``. Values may reference ``${VAR}``, resolved at connect time from the
environment, then the project's ``.env``. The sandbox never sees these files (they are masked)
nor the values (they are resolved on the host, for the host's MCP session only).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import McpServerError

CONFIG_FILE = "server.json"
IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class StdioServer(BaseModel):
    """A server cemcp starts as a subprocess and talks to over its stdin/stdout."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None

    def public(self) -> dict[str, Any]:
        data: dict[str, Any] = {"command": self.command, "args": self.args}
        if self.env:
            data["env"] = self.env
        if self.cwd:
            data["cwd"] = self.cwd
        return data


class HttpServer(BaseModel):
    """A server already running somewhere, reached over streamable HTTP."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["http", "streamable-http", "streamableHttp"] = "http"
    url: str = Field(min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "http", "url": self.url}
        if self.headers:
            data["headers"] = self.headers
        return data


ServerConfig = StdioServer | HttpServer


def parse_server(data: Any, where: str) -> ServerConfig:
    """One ``mcpServers`` entry; ConfigError-style message naming the file and the field."""
    if not isinstance(data, dict):
        raise McpServerError(f"{where}: expected a JSON object with `command` or `url`.")
    kind = data.get("type") or data.get("transport")
    if kind == "sse":
        raise McpServerError(
            f"{where}: the SSE transport is not supported; use the server's streamable HTTP "
            "endpoint (`url`) or start it over stdio (`command`)."
        )
    try:
        if "url" in data and "command" not in data:
            return HttpServer.model_validate(data)
        if "command" in data:
            return StdioServer.model_validate({**data, "type": "stdio"})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise McpServerError(f"{where}: {problems}") from None
    raise McpServerError(
        f"{where}: say how to reach the server: `command` (and `args`, `env`) for stdio, "
        "or `url` (and `headers`) for streamable HTTP."
    )


def load_server(folder: Path) -> ServerConfig:
    path = folder / CONFIG_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise McpServerError(
            f"servers/{folder.name} has no {CONFIG_FILE}, so it has no live server to call. "
            f"Add one with `python -m cemcp_kernel servers add {folder.name} -- COMMAND ...`."
        ) from None
    except (OSError, ValueError) as exc:
        raise McpServerError(f"servers/{folder.name}/{CONFIG_FILE} cannot be read: {exc}") from None
    return parse_server(data, f"servers/{folder.name}/{CONFIG_FILE}")


def write_server(folder: Path, config: ServerConfig) -> bool:
    """Write server.json when its content changes; True when it was written."""
    text = json.dumps(config.public(), indent=2, ensure_ascii=False) + "\n"
    return write_if_changed(folder / CONFIG_FILE, text)


def write_if_changed(path: Path, text: str) -> bool:
    """Leave a file (and its mtime) alone when it already holds ``text``."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True


# --- values ---------------------------------------------------------------------------------------


def host_values(project_dir: Path, pending: Mapping[str, str] | None = None) -> dict[str, str]:
    """What ``${VAR}`` may name: the project's .env (plus ``pending`` values about to be
    written there), overridden by the environment."""
    values = {k: v for k, v in dotenv_values(project_dir / ".env").items() if v is not None}
    values.update(pending or {})
    values.update(os.environ)
    return values


def expand(text: str, values: Mapping[str, str], where: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise McpServerError(
                f"{where} needs ${{{name}}}: set {name} in the environment or in the "
                "project's .env file."
            )
        return values[name]

    return _REFERENCE.sub(replace, text)


def resolve(
    config: ServerConfig, name: str, project_dir: Path, pending: Mapping[str, str] | None = None
) -> ServerConfig:
    """A copy with every ``${VAR}`` replaced and a stdio command made absolute.

    The result holds credentials: it lives only in the host's memory, for the MCP session.
    """
    values = host_values(project_dir, pending)
    where = f"servers/{name}/{CONFIG_FILE}"
    if isinstance(config, HttpServer):
        return config.model_copy(
            update={
                "url": expand(config.url, values, where),
                "headers": {k: expand(v, values, where) for k, v in config.headers.items()},
            }
        )
    cwd = Path(expand(config.cwd, values, where)) if config.cwd else None
    base = project_dir if cwd is None else (project_dir / cwd)
    return config.model_copy(
        update={
            "command": find_command(expand(config.command, values, where), base, name),
            "args": [expand(a, values, where) for a in config.args],
            "env": {k: expand(v, values, where) for k, v in config.env.items()},
            "cwd": str(base),
        }
    )


def command_search_path(project_dir: Path) -> list[str]:
    """PATH, then this interpreter's scripts folder, then the project's node_modules/.bin:
    servers installed next to cemcp are found without activating anything."""
    folders = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    folders.append(str(Path(sys.executable).parent))
    folders.append(str(project_dir / "node_modules" / ".bin"))
    return folders


def find_command(command: str, base: Path, name: str) -> str:
    if "/" in command:
        path = Path(command).expanduser()
        path = path if path.is_absolute() else base / path
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise McpServerError(
            f"servers/{name}: the command {command!r} does not exist or is not executable "
            f"(looked at {path}). Install the server, or fix `command` in "
            f"servers/{name}/{CONFIG_FILE}."
        )
    found = shutil.which(command, path=os.pathsep.join(command_search_path(base)))
    if found is None:
        raise McpServerError(
            f"servers/{name}: the command {command!r} was not found on PATH, next to this "
            f"Python, or in node_modules/.bin. Install the server (e.g. `pip install {command}` "
            f"or `npm install ...`), or fix `command` in servers/{name}/{CONFIG_FILE}."
        )
    return found


# --- secrets --------------------------------------------------------------------------------------


def env_name(server: str, key: str) -> str:
    """The .env variable a literal value of ``key`` moves to: ``MCP_<SERVER>_<KEY>``.

    The ``MCP_`` prefix keeps these apart from cemcp's own settings (``CEMCP_*``, ``OPENAI_*``).
    """
    server_part = re.sub(r"[^A-Za-z0-9]+", "_", server).strip("_").upper()
    key_part = re.sub(r"[^A-Za-z0-9]+", "_", key).strip("_").upper() or "VALUE"
    if key_part.startswith(server_part + "_"):
        return f"MCP_{key_part}"
    return f"MCP_{server_part}_{key_part}"


def move_secrets(
    config: ServerConfig, server: str, env_file: Path
) -> tuple[ServerConfig, dict[str, str]]:
    """Replace every literal ``env``/``headers`` value with a ``${VAR}`` reference.

    Returns the new config and the values to append to ``env_file`` (not written here: the
    caller writes them once the server has answered). Values that already reference
    ``${...}`` stay; a variable the .env file already holds with the same value is reused.
    """
    existing = {k: v for k, v in dotenv_values(env_file).items() if v is not None}
    moved: dict[str, str] = {}

    def keep(key: str, value: str) -> str:
        if _REFERENCE.search(value):
            return value
        name = env_name(server, key)
        candidate, n = name, 2
        while (candidate in existing and existing[candidate] != value) or (
            candidate in moved and moved[candidate] != value
        ):
            candidate, n = f"{name}_{n}", n + 1
        if existing.get(candidate) != value:
            moved[candidate] = value
        return f"${{{candidate}}}"

    if isinstance(config, HttpServer):
        new: ServerConfig = config.model_copy(
            update={"headers": {k: keep(k, v) for k, v in config.headers.items()}}
        )
    else:
        new = config.model_copy(update={"env": {k: keep(k, v) for k, v in config.env.items()}})
    return new, moved


def append_env(env_file: Path, values: Mapping[str, str]) -> None:
    """Append NAME='value' lines (python-dotenv syntax), creating the file private to the user."""
    lines = []
    for name, value in values.items():
        quoted = value.replace("\\", "\\\\").replace("'", "\\'")
        lines.append(f"{name}='{quoted}'\n")
    existing = env_file.read_text(encoding="utf-8") if env_file.exists() else ""
    prefix = "" if not existing or existing.endswith("\n") else "\n"
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(prefix + "".join(lines))
