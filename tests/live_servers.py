"""Real third-party MCP servers for the bridge tests, and a project whose tool tree was made
from them by ``python -m cemcp_kernel servers add``, exactly as a user would.

mcp-server-time and mcp-server-sqlite (a release built for mcp 1.x) come from the test extra;
@modelcontextprotocol/server-everything from npm, installed by ``make setup`` into
node_modules/. Tests that need it are skipped only when npm itself is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from .conftest import ROOT

EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"
SERVER_SECRET = "mcp-secret-7f3a9c1e5b2d4f60"


def require_everything() -> Path:
    if EVERYTHING.exists():
        return EVERYTHING
    if shutil.which("npm") is None:
        pytest.skip(
            "npm is not installed, so @modelcontextprotocol/server-everything is not either"
        )
    pytest.fail("node_modules/.bin/mcp-server-everything is missing: run `make setup`")


def cemcp(project: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m cemcp_kernel ARGS`` for the project, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CEMCP_")}
    env.update(
        {"CEMCP_PROJECT_DIR": str(project), "CEMCP_CACHE_DIR": os.environ["CEMCP_CACHE_DIR"]}
    )
    result = subprocess.run(
        [sys.executable, "-m", "cemcp_kernel", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"cemcp {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


@dataclass
class LiveProject:
    root: Path

    @property
    def servers(self) -> Path:
        return self.root / "servers"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"


def make_live_project(root: Path) -> LiveProject:
    """time and everything added from the live servers; two more server.json files for
    failures: a command that does not exist, and a server built for mcp 1.x."""
    project = LiveProject(root)
    project.servers.mkdir(parents=True)
    project.workspace.mkdir()
    cemcp(root, "servers", "add", "time", "--", "mcp-server-time", "--local-timezone", "UTC")
    everything = require_everything()
    cemcp(
        root, "servers", "add", "everything", "--env", f"API_TOKEN={SERVER_SECRET}", "--",
        str(everything), "stdio",
    )  # fmt: skip
    for name, config in {
        "missing": {"command": "cemcp-no-such-mcp-server"},
        "sqlite_v1": {"command": "mcp-server-sqlite", "args": ["--db-path", str(root / "v1.db")]},
    }.items():
        (project.servers / name).mkdir()
        (project.servers / name / "server.json").write_text(json.dumps(config))
    native = project.servers / "native"
    native.mkdir()
    (native / "shout.py").write_text(
        'def shout(text: str) -> str:\n    """Upper-case text, in plain Python."""\n'
        "    return text.upper()\n"
    )
    return project


def server_processes(root_pid: int, marker: str) -> list[psutil.Process]:
    """Live descendants of ``root_pid`` whose command line mentions ``marker``."""
    found = []
    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for child in children:
        try:
            if child.status() != psutil.STATUS_ZOMBIE and marker in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def kill_once_it_reads(process: psutil.Process, read_before: int, timeout: float = 30.0) -> None:
    """Kill the server as soon as it has read more of its stdin than ``read_before`` bytes: the
    call it was sent has arrived and is under way."""
    deadline = time.monotonic() + timeout
    while process.io_counters().read_chars <= read_before:
        if time.monotonic() > deadline:
            raise AssertionError("the server never received the call")
        time.sleep(0.02)
    time.sleep(0.2)
    process.kill()
