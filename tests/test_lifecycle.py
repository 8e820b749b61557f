"""Pool behaviour and process lifecycle: nothing is left running after a kernel goes away."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from cemcp_kernel.config import Settings
from cemcp_kernel.engine import Engine


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[1]), int(fields[19])) if fields[0] not in (b"Z", b"X") else None


def descendants(root: int) -> dict[int, int]:
    """Every live process below ``root``, with its start time (so a reused pid is not confused)."""
    table = {int(p): _stat(int(p)) for p in os.listdir("/proc") if p.isdigit()}
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, info in table.items():
            if info is not None and info[0] == parent and pid not in found:
                found[pid] = info[1]
                frontier.append(pid)
    return found


def wait_until_gone(processes: dict[int, int], limit: float = 15.0) -> list[int]:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        alive = [p for p, start in processes.items() if (_stat(p) or (0, -1))[1] == start]
        if not alive:
            return []
        time.sleep(0.1)
    return alive


def test_pool_warms_up_and_refills_after_a_lease(settings: Settings) -> None:
    with Engine(settings.updated({"sandbox.pool_size": 2})) as engine:
        status = engine.wait_ready()
        assert (status.warm, status.leased) == (2, 0)
        assert engine.execute("1").ok
        status = engine.wait_ready()
        assert (status.warm, status.leased) == (2, 1)


def test_sessions_are_sticky_and_separate(engine: Engine) -> None:
    engine.execute("name = 'a'", session="a")
    engine.execute("name = 'b'", session="b")
    assert engine.execute("name", session="a").value.data == "a"
    assert engine.execute("name", session="b").value.data == "b"


def test_a_busy_or_dead_warm_sandbox_is_never_handed_out(settings: Settings) -> None:
    with Engine(settings.updated({"sandbox.pool_size": 2})) as engine:
        engine.wait_ready()
        busy, dead = engine.pool._idle
        # Behind the pool's back: one warm sandbox starts work, the other's agent dies.
        engine._call(busy.channel.start_execution("import time\ntime.sleep(60)", 1000, None))
        engine._call(dead.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"))
        result = engine.execute("'fresh'")
        assert result.ok, result
        assert result.value.data == "fresh"
        assert result.sandbox not in (busy.id, dead.id)


def test_engine_close_leaves_no_process(settings: Settings) -> None:
    engine = Engine(settings.updated({"sandbox.pool_size": 3}))
    engine.wait_ready()
    engine.execute("x = 1")
    sandboxes = descendants(os.getpid())
    assert len(sandboxes) >= 6  # bwrap, its reaper and the agent, for each of 3 or 4 sandboxes
    engine.close()
    assert wait_until_gone(sandboxes) == []


def test_kernel_shutdown_and_restart_leave_no_process(start_kernel, kernel_env) -> None:
    kernel = start_kernel(kernel_env)
    assert kernel.run("%%mcp --code\nx = 1\nx").results() == ["1"]
    before_restart = {kernel.pid: _stat(kernel.pid)[1], **descendants(kernel.pid)}  # type: ignore[index]
    assert len(before_restart) >= 4
    kernel.manager.restart_kernel(now=False)
    kernel.client.wait_for_ready(timeout=60)
    assert wait_until_gone(before_restart) == []
    assert kernel.run("%%mcp --code\n'restarted'").results() == ["'restarted'"]
    before_shutdown = {kernel.pid: _stat(kernel.pid)[1], **descendants(kernel.pid)}  # type: ignore[index]
    kernel.shutdown()
    assert wait_until_gone(before_shutdown) == []


def test_a_killed_kernel_leaves_no_process(start_kernel, kernel_env) -> None:
    kernel = start_kernel(kernel_env)
    assert kernel.run("%%mcp --code\n'ready'").results() == ["'ready'"]
    sandboxes = descendants(kernel.pid)
    assert len(sandboxes) >= 3
    os.kill(kernel.pid, signal.SIGKILL)
    assert wait_until_gone(sandboxes) == []


def test_closing_while_sandboxes_start_leaves_nothing_behind(settings: Settings) -> None:
    """Shut down at every stage of start-up (spawn, namespace set-up, agent start): every
    sandbox is killed, and no task is left pending on the engine's loop."""
    for pause in (0.0, 0.01, 0.03, 0.06, 0.1, 0.15):
        engine = Engine(settings.updated({"sandbox.pool_size": 3}))
        time.sleep(pause)
        engine.close()
        assert engine._loop.is_closed()
        deadline = time.monotonic() + 15
        while (left := descendants(os.getpid())) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left == {}, f"left running after a close at {pause} s"
