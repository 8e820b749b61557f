"""The bridge for real: wrappers generated from live third-party servers, called from code in
the bubblewrap sandbox, answered by the server through the host's MCP session."""

from __future__ import annotations

import asyncio
import base64
import os
import threading
from collections.abc import Iterator
from datetime import datetime, timezone

import psutil
import pytest

from cemcp_kernel.bridge import Bridge
from cemcp_kernel.config import load_settings
from cemcp_kernel.engine import Engine

from .live_servers import SERVER_SECRET, LiveProject, kill_once_it_reads, server_processes


@pytest.fixture(scope="module")
def live_engine(live_project: LiveProject) -> Iterator[Engine]:
    with Engine(load_settings(live_project.root, sandbox__pool_size=1)) as engine:
        yield engine


def test_a_generated_wrapper_returns_the_servers_structured_answer(live_engine: Engine) -> None:
    result = live_engine.execute(
        "from servers.time import get_current_time\nget_current_time('UTC')"
    )
    assert result.ok, result.error
    answer = result.value.data
    assert answer["timezone"] == "UTC" and isinstance(answer["is_dst"], bool)
    when = datetime.fromisoformat(answer["datetime"])
    assert abs((datetime.now(timezone.utc) - when).total_seconds()) < 600
    assert [(c.server, c.tool, c.ok) for c in result.tool_calls] == [
        ("time", "get_current_time", True)
    ]


def test_text_structured_content_and_images_come_back_as_plain_data(live_engine: Engine) -> None:
    code = (
        "from servers.everything import echo, get_structured_content, get_tiny_image\n"
        "(echo('hi there'), get_structured_content('Chicago'), get_tiny_image())"
    )
    result = live_engine.execute(code)
    assert result.ok, result.error
    echoed, weather, image = result.value.data
    assert echoed == "Echo: hi there"
    assert set(weather) == {"temperature", "conditions", "humidity"}
    pictures = [item for item in image if isinstance(item, dict)]
    assert pictures[0]["type"] == "image" and pictures[0]["mime_type"] == "image/png"
    assert base64.b64decode(pictures[0]["data"]).startswith(b"\x89PNG")


def test_concurrent_calls_from_threads_and_from_asyncio_gather(live_engine: Engine) -> None:
    code = """
import asyncio, threading
from servers.everything import echo_async, get_sum

echoed = await asyncio.gather(*(echo_async(f"m{i}") for i in range(8)))
sums = {}
def work(i):
    sums[i] = get_sum(i, 100)
threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
(echoed, [sums[i] for i in range(6)])
"""
    result = live_engine.execute(code)
    assert result.ok, result.error
    echoed, sums = result.value.data
    assert echoed == [f"Echo: m{i}" for i in range(8)]
    assert sums == [f"The sum of {i} and 100 is {i + 100}." for i in range(6)]
    assert len(result.tool_calls) == 14 and all(c.ok for c in result.tool_calls)


def test_wrong_arguments_are_refused_before_they_leave_the_sandbox(live_engine: Engine) -> None:
    cases = {
        "get_sum('x', 2)": "argument 'a' must be int or float, got str 'x'",
        "get_structured_content('Paris')": "must be one of 'New York', 'Chicago', 'Los Angeles'",
        "echo(message=None)": "argument 'message' must be str, got None",
        "get_sum(1, float('nan'))": "argument 'b' is nan, which JSON cannot carry",
        "echo(__import__('datetime').date(2024, 1, 1))": "cannot be sent to an MCP server",
    }
    for call, message in cases.items():
        code = f"from servers.everything import echo, get_structured_content, get_sum\n{call}"
        result = live_engine.execute(code)
        assert result.error is not None and result.error.ename == "ToolArgumentError", call
        assert message in result.error.evalue, (call, result.error.evalue)
        assert result.tool_calls == [], call  # nothing reached the host


def test_a_tool_error_raises_tool_error_with_the_servers_message(live_engine: Engine) -> None:
    code = """
from cemcp_sandbox import ToolError
from servers.time import get_current_time
try:
    get_current_time('Mars/Olympus_Mons')
except ToolError as exc:
    caught = (exc.server, exc.tool, str(exc))
caught
"""
    result = live_engine.execute(code)
    assert result.ok, result.error
    server, tool, message = result.value.data
    assert (server, tool) == ("time", "get_current_time")
    assert "time.get_current_time failed" in message and "Invalid timezone" in message
    assert result.tool_calls[0].ok is False


def test_a_call_that_hangs_times_out_and_the_session_keeps_its_variables(
    live_engine: Engine,
) -> None:
    assert live_engine.execute("kept = 41").ok
    code = (
        "from cemcp_sandbox import call_tool\n"
        "call_tool('everything', 'trigger-long-running-operation', "
        "{'duration': 30, 'steps': 1}, timeout=1)"
    )
    result = live_engine.execute(code)
    assert result.error is not None and result.error.ename == "ToolError"
    assert "did not answer within 1 s" in result.error.evalue
    assert "timeout=SECONDS" in result.error.evalue
    after = live_engine.execute("from servers.everything import echo\n(kept + 1, echo('still'))")
    assert after.value.data == [42, "Echo: still"]


def test_a_server_that_dies_mid_call_is_reported_and_started_again(live_engine: Engine) -> None:
    assert live_engine.execute("from servers.everything import echo\necho('warm')").ok
    (server,) = server_processes(os.getpid(), "mcp-server-everything")
    results = []
    code = (
        "from servers.everything import trigger_long_running_operation\n"
        "trigger_long_running_operation(duration=30, steps=1)"
    )
    read_before = server.io_counters().read_chars
    worker = threading.Thread(target=lambda: results.append(live_engine.execute(code)))
    worker.start()
    kill_once_it_reads(server, read_before)
    worker.join(30)
    result = results[0]
    assert result.error is not None and result.error.ename == "ToolError"
    assert "stopped during the call" in result.error.evalue
    assert "next call starts it again" in result.error.evalue
    again = live_engine.execute("echo('back')")
    assert again.value.data == "Echo: back"
    (restarted,) = server_processes(os.getpid(), "mcp-server-everything")
    assert restarted.pid != server.pid


def test_unknown_servers_tools_and_commands_say_what_to_do(live_engine: Engine) -> None:
    cases = {
        ("missing", "anything"): "command 'cemcp-no-such-mcp-server' was not found",
        ("nowhere", "anything"): "there is no folder servers/nowhere",
        ("../etc", "passwd"): "is not a server name",
        ("native", "shout"): "servers/native has no server.json",
        (
            "time",
            "no_such_tool",
        ): "has no tool 'no_such_tool' (it has: convert_time, get_current_time)",
    }
    for (server, tool), message in cases.items():
        result = live_engine.execute(
            f"from cemcp_sandbox import call_tool\ncall_tool({server!r}, {tool!r}, {{}})"
        )
        assert result.error is not None and result.error.ename == "ToolError", server
        assert message in result.error.evalue, (server, result.error.evalue)


def test_a_server_built_for_another_mcp_major_version_is_explained(live_engine: Engine) -> None:
    result = live_engine.execute(
        "from cemcp_sandbox import call_tool\ncall_tool('sqlite_v1', 'list_tables', {})"
    )
    assert result.error is not None and result.error.ename == "ToolError"
    message = result.error.evalue
    assert "exited while starting" in message
    assert "'Server' object has no attribute 'list_resources'" in message
    assert "another version of the `mcp` package" in message


def test_no_server_process_outlives_its_engine(live_project: LiveProject) -> None:
    markers = ("mcp-server-time", "mcp-server-everything")

    def servers() -> dict[int, psutil.Process]:
        return {p.pid: p for m in markers for p in server_processes(os.getpid(), m)}

    before = servers()  # the module's engine may have its own
    with Engine(load_settings(live_project.root, sandbox__pool_size=1)) as engine:
        code = (
            "from servers.time import get_current_time\nfrom servers.everything import echo\n"
            "(get_current_time('UTC')['timezone'], echo('x'))"
        )
        assert engine.execute(code).value.data == ["UTC", "Echo: x"]
        started = [p for pid, p in servers().items() if pid not in before]
        assert len(started) == 2
    for process in started:
        assert not process.is_running(), process.cmdline()
    assert set(servers()) <= set(before)


def test_credentials_never_enter_the_sandbox(
    live_project: LiveProject, live_engine: Engine
) -> None:
    # On the host: the secret moved to .env; the tool tree only references it.
    assert SERVER_SECRET in (live_project.root / ".env").read_text()
    config = (live_project.servers / "everything" / "server.json").read_text()
    assert "${MCP_EVERYTHING_API_TOKEN}" in config
    for path in live_project.servers.rglob("*"):
        if path.is_file():
            assert SERVER_SECRET.encode() not in path.read_bytes(), path
    # The server itself gets it, resolved on the host at connect time.
    bridge = Bridge(live_engine.settings)

    async def server_env() -> str:
        try:
            return str(await bridge.call("everything", "get-env", {}))
        finally:
            await bridge.close()

    assert SERVER_SECRET in asyncio.run(server_env())
    # In the sandbox, with a live session holding it on the host: nowhere to be found.
    scan = f"""
import os
secret = {SERVER_SECRET!r}.encode()
from servers.everything import echo
echo('session is live')
hits = []
for top in ('/opt', '/workspace', '/tmp', '/etc', '/'):
    for folder, dirs, files in os.walk(top):
        if top == '/':
            dirs[:] = []
        for name in files:
            path = os.path.join(folder, name)
            try:
                if secret in open(path, 'rb').read(5_000_000):
                    hits.append(path)
            except OSError:
                pass
for pid in os.listdir('/proc'):
    for part in ('environ', 'cmdline'):
        try:
            if pid.isdigit() and secret in open(f'/proc/{{pid}}/{{part}}', 'rb').read():
                hits.append(f'/proc/{{pid}}/{{part}}')
        except OSError:
            pass
try:
    masked = open('/opt/cemcp/lib/servers/everything/server.json').read()
except OSError as exc:
    masked = type(exc).__name__
(hits, secret.decode() in str(os.environ), masked)
"""
    result = live_engine.execute(scan, timeout=60)
    assert result.ok, result.error
    hits, in_environment, masked = result.value.data
    assert hits == [] and not in_environment
    assert masked in ("", "PermissionError")  # server.json is masked: empty or unreadable
