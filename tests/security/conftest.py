"""One cemcp kernel for the whole suite, on a project that holds secrets in every usual place:
the kernel's environment, the project's .env, an MCP server's server.json, a private host file."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import ROOT, CellOutput, KernelSession, loopback_listener

SECRET = "sk-cemcp-security-secret-7f3a9c"


@dataclass
class Host:
    kernel: KernelSession
    project: Path
    workspace: Path
    private_file: Path
    listener_port: int
    accepted: list[object]

    @property
    def canary_digest(self) -> str:
        return hashlib.sha256((self.workspace / "canary.txt").read_bytes()).hexdigest()

    def attempt(self, code: str, timeout: float = 60) -> CellOutput:
        return self.kernel.run(f"%%mcp --code --timeout 5\n{code}", timeout=timeout)


@pytest.fixture(scope="package")
def host(tmp_path_factory: pytest.TempPathFactory, installed_kernelspec: str) -> Iterator[Host]:
    base = tmp_path_factory.mktemp("secure")
    project = base / "project"
    shutil.copytree(ROOT / "servers", project / "servers")
    secretive = project / "servers" / "secretive"
    secretive.mkdir()
    (secretive / "server.json").write_text(
        f'{{"command": "true", "env": {{"SERVICE_TOKEN": "{SECRET}"}}}}'
    )
    (secretive / "ping.py").write_text(
        "def ping() -> str:\n    'Answer pong.'\n    return 'pong'\n"
    )
    (project / "skills").mkdir()
    (project / "cemcp.toml").write_text("[sandbox]\npool_size = 1\n")
    (project / ".env").write_text(f"SERVICE_TOKEN={SECRET}\n")
    workspace = project / "workspace"
    workspace.mkdir()
    (workspace / "canary.txt").write_text("the workspace must survive every attempt\n")
    private = base / "private.txt"
    private.write_text(f"host-only {SECRET}\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    env.update(
        {"CEMCP_PROJECT_DIR": str(project), "OPENAI_API_KEY": SECRET, "SERVICE_TOKEN": SECRET}
    )
    with loopback_listener() as listener:
        kernel = KernelSession(env, project)
        yield Host(kernel, project, workspace, private, listener.port, listener.accepted)
        kernel.shutdown()


@pytest.fixture
def contained(host: Host) -> Iterator[Host]:
    """After each attempt: the kernel is alive, the workspace intact, the next cell works."""
    before = host.canary_digest
    private_before = host.private_file.read_text()
    yield host
    assert host.kernel.manager.is_alive()
    host.kernel.client.kernel_info(reply=True, timeout=10)
    assert host.canary_digest == before
    assert host.private_file.read_text() == private_before
    assert host.accepted == []
    assert host.kernel.run("%%mcp --code\n6 * 7").results() == ["42"]
