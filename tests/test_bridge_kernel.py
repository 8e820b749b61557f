"""%%mcp cells in the real kernel calling live MCP servers through the bridge: answers, and every
way a live server can fail, each a clear error in the cell with the kernel alive after it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from .conftest import KernelSession
from .live_servers import LiveProject, cemcp, kill_once_it_reads, server_processes


@pytest.fixture(scope="module")
def kernel(installed_kernelspec: str, live_project: LiveProject) -> Iterator[KernelSession]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    env.update(
        {
            "CEMCP_PROJECT_DIR": str(live_project.root),
            "CEMCP_SERVERS_DIR": str(live_project.servers),
            "CEMCP_WORKSPACE_DIR": str(live_project.workspace),
            "CEMCP_SANDBOX__POOL_SIZE": "1",
        }
    )
    session = KernelSession(env, live_project.root)
    yield session
    if session.manager.is_alive():
        session.shutdown()


def _alive(kernel: KernelSession) -> None:
    assert kernel.run("%%mcp --code\n6 * 7").results() == ["42"]


def test_a_request_becomes_a_live_tool_call(kernel: KernelSession) -> None:
    cell = kernel.run("%%mcp --yes\nget_current_time timezone='UTC'")
    assert cell.status == "ok", cell.text()
    assert "from servers.time.get_current_time import get_current_time" in cell.text()
    (answer,) = cell.results()
    assert "'timezone': 'UTC'" in answer and "'day_of_week'" in answer


def test_a_server_added_while_the_kernel_runs_is_used_by_the_next_cell(
    kernel: KernelSession, live_project: LiveProject
) -> None:
    cemcp(live_project.root, "servers", "add", "clock", "--", "mcp-server-time")
    cell = kernel.run(
        "%%mcp --code\nfrom servers.clock import convert_time\n"
        "convert_time('UTC', '12:00', 'Asia/Tokyo')['target']['datetime'][11:16]"
    )
    assert cell.status == "ok", cell.text()
    assert cell.results() == ["'21:00'"]


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        pytest.param(
            "%%mcp --code\nfrom cemcp_sandbox import call_tool\ncall_tool('missing', 'x', {})",
            [
                "ToolError",
                "'cemcp-no-such-mcp-server' was not found",
                "servers/missing/server.json",
            ],
            id="command-not-found",
        ),
        pytest.param(
            "%%mcp --yes\nget_current_time timezone='Mars/Olympus_Mons'",
            ["ToolError", "time.get_current_time failed", "Invalid timezone"],
            id="is-error-result",
        ),
        pytest.param(
            "%%mcp --code\nfrom servers.everything import get_sum\nget_sum('one', 2)",
            ["ToolArgumentError", "argument 'a' must be int or float, got str 'one'"],
            id="wrong-argument-types",
        ),
        pytest.param(
            "%%mcp --code\nfrom cemcp_sandbox import call_tool\ncall_tool('sqlite_v1', 'list_tables', {})",
            ["ToolError", "no attribute 'list_resources'", "another version of the `mcp` package"],
            id="other-mcp-major-version",
        ),
    ],
)
def test_a_failing_server_is_a_clear_error_and_the_kernel_lives(
    kernel: KernelSession, cell: str, expected: list[str]
) -> None:
    result = kernel.run(cell)
    assert result.status == "error"
    for text in expected:
        assert text in result.text(), (text, result.text())
    assert "cemcp_kernel" not in result.text()  # the sandbox's traceback, not the host's
    _alive(kernel)


def test_a_hanging_server_times_out(kernel: KernelSession) -> None:
    kernel.run("%mcp_config tool_timeout=2")
    cell = kernel.run(
        "%%mcp --code\nfrom servers.everything import trigger_long_running_operation\n"
        "trigger_long_running_operation(duration=30, steps=1)"
    )
    kernel.run("%mcp_config tool_timeout=30")
    assert cell.status == "error"
    assert "did not answer within 2 s" in cell.text()
    _alive(kernel)


def test_a_server_crashing_mid_call_is_reported_and_restarted(kernel: KernelSession) -> None:
    warm = kernel.run("%%mcp --code\nfrom servers.everything import echo\necho('warm')")
    assert warm.results() == ["'Echo: warm'"], warm.text()
    (server,) = server_processes(kernel.pid, "mcp-server-everything")
    cell = (
        "%%mcp --code\nfrom servers.everything import trigger_long_running_operation\n"
        "trigger_long_running_operation(duration=30, steps=1)"
    )
    # Killed while the call is under way (jupyter_client's client stays on this thread).
    read_before = server.io_counters().read_chars
    killer = threading.Thread(target=kill_once_it_reads, args=(server, read_before))
    killer.start()
    crashed = kernel.run(cell)
    killer.join()
    assert crashed.status == "error"
    assert "stopped during the call" in crashed.text()
    again = kernel.run("%%mcp --code\necho('again')")
    assert again.results() == ["'Echo: again'"], again.text()


def test_shutting_the_kernel_down_stops_its_servers(kernel: KernelSession) -> None:
    assert kernel.run("%%mcp --code\necho('x')").results() == ["'Echo: x'"]
    servers = server_processes(kernel.pid, "mcp-server")
    assert {"mcp-server-everything", "mcp-server-time"} <= {
        Path(part).name for p in servers for part in p.cmdline()
    }
    kernel.shutdown()
    deadline = time.monotonic() + 15
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in servers):
        assert time.monotonic() < deadline, [p.cmdline() for p in servers if p.is_running()]
        time.sleep(0.2)
