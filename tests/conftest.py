"""Shared fixtures: settings on a temporary workspace, a real engine, a scripted model endpoint,
and the installed cemcp kernel started through jupyter_client exactly as Jupyter starts it."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cemcp_kernel.config import Settings, load_settings
from cemcp_kernel.embeddings import Embedder, load_embedder, missing_packages
from cemcp_kernel.engine import Engine
from cemcp_kernel.scripted_model import ScriptedOpenAI

ROOT = Path(__file__).resolve().parent.parent
SECRET_KEY = "sk-cemcp-test-secret-0123456789"


@dataclass
class Listener:
    """A TCP server on the host's loopback; a sandbox without network must leave ``accepted``
    empty."""

    port: int
    accepted: list[object]


@contextlib.contextmanager
def loopback_listener() -> Iterator[Listener]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[object] = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    try:
        yield Listener(server.getsockname()[1], accepted)
    finally:
        server.close()


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests never read or write the user's cemcp cache or microsandbox state (nor another test
    run's), and see no model from the developer's env."""
    names = ("CEMCP_CACHE_DIR", "MSB_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL")
    saved = {k: os.environ.get(k) for k in names}
    os.environ["CEMCP_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    # A short path: microsandbox keeps its sockets under it.
    msb_home = os.environ["MSB_HOME"] = tempfile.mkdtemp(prefix="cemcp-msb-")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    # CEMCP_SELECTION__WAIT stays: `make test` sets it for the notebooks, which run after tests/.
    # CEMCP_TEST_MICROSANDBOX_ROOTFS points the microVM boot tests at a bootable root filesystem.
    keep = ("CEMCP_CACHE_DIR", "CEMCP_SELECTION__WAIT", "CEMCP_TEST_MICROSANDBOX_ROOTFS")
    for name in [
        n for n in os.environ if n.startswith(("AZURE_OPENAI_", "CEMCP_")) and n not in keep
    ]:
        os.environ.pop(name)
    yield
    shutil.rmtree(msb_home, ignore_errors=True)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session", autouse=True)
def _sandbox_packages() -> None:
    """The sandbox's own packages (pandas, matplotlib), as `make setup` installs them: a bare
    `pip install -e ".[test]"` then runs the whole suite too."""
    from cemcp_kernel.sandbox import packages

    packages.install(load_settings(ROOT))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def settings(workspace: Path) -> Settings:
    """Keyword selection unless a test asks for the model: loading it costs seconds of CPU."""
    return load_settings(
        ROOT, workspace_dir=str(workspace), sandbox__pool_size=1, selection__semantic=False
    )


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real all-MiniLM-L6-v2, loaded once for the whole session (it takes seconds)."""
    missing = missing_packages()
    if missing:
        pytest.skip(f"the semantic extra is not installed ({', '.join(missing)} missing)")
    return load_embedder()


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    with Engine(settings) as engine:
        yield engine


@pytest.fixture
def openai_server() -> Iterator[ScriptedOpenAI]:
    server = ScriptedOpenAI().start()
    yield server
    server.stop()


@dataclass
class CellOutput:
    status: str
    outputs: list[dict[str, Any]] = field(default_factory=list)

    def text(self) -> str:
        """All text the cell showed: streams, text/plain of results, error tracebacks."""
        parts = []
        for out in self.outputs:
            if out["msg_type"] == "stream":
                parts.append(out["content"]["text"])
            elif out["msg_type"] in ("execute_result", "display_data", "update_display_data"):
                parts.append(out["content"]["data"].get("text/plain", ""))
            elif out["msg_type"] == "error":
                parts.append("\n".join(out["content"]["traceback"]))
        return "\n".join(parts)

    def results(self) -> list[str]:
        return [
            o["content"]["data"].get("text/plain", "")
            for o in self.outputs
            if o["msg_type"] == "execute_result"
        ]


class KernelSession:
    """The installed ``cemcp`` kernel, started by jupyter_client's KernelManager."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel(
            kernel_name="cemcp", env=env, cwd=str(cwd), startup_timeout=60
        )

    def run(self, code: str, timeout: float = 120) -> CellOutput:
        result = CellOutput(status="")

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] in (
                "stream",
                "execute_result",
                "display_data",
                "update_display_data",
                "error",
            ):
                result.outputs.append({"msg_type": msg["msg_type"], "content": msg["content"]})

        reply = self.client.execute_interactive(code, output_hook=hook, timeout=timeout)
        result.status = reply["content"]["status"]
        return result

    @property
    def pid(self) -> int:
        return int(self.manager.provisioner.pid)  # type: ignore[union-attr]

    def shutdown(self) -> None:
        if self.manager.has_kernel:
            self.client.stop_channels()
            self.manager.shutdown_kernel(now=False)


@pytest.fixture(scope="session")
def installed_kernelspec() -> str:
    """Install the kernelspec into this environment, as `python -m cemcp_kernel install --sys-prefix`."""
    from cemcp_kernel.kernelspec import install

    return install(prefix=sys.prefix)


@pytest.fixture
def kernel_env(workspace: Path, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    env.update(
        {
            "CEMCP_PROJECT_DIR": str(ROOT),
            "CEMCP_WORKSPACE_DIR": str(workspace),
            "CEMCP_SANDBOX__POOL_SIZE": "1",
            "CEMCP_SELECTION__SEMANTIC": "false",  # kernels that test selection turn it on
        }
    )
    return env


@pytest.fixture
def start_kernel(installed_kernelspec: str, tmp_path: Path) -> Iterator[Any]:
    """Start kernels with a given environment; every one is shut down after the test."""
    sessions: list[KernelSession] = []

    def start(env: dict[str, str]) -> KernelSession:
        session = KernelSession(env, tmp_path)
        sessions.append(session)
        return session

    yield start
    for session in sessions:
        session.shutdown()


@pytest.fixture(scope="session")
def live_project(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A project whose servers/ holds wrappers generated from live third-party servers."""
    from .live_servers import make_live_project

    return make_live_project(tmp_path_factory.mktemp("live-project"))
