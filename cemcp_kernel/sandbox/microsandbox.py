"""The microsandbox backend: the agent inside a microVM with its own guest kernel.

microsandbox (libkrun on KVM) boots an OCI image, or a host directory as the root filesystem, and
runs the same stdlib-only agent there with ``exec_stream``; frames go to the process's stdin sink
and come back on its stdout. The guest gets no network interface, the workspace as a volume at
``/workspace``, the agent and the tool tree read-only at ``/opt/cemcp/lib`` (``server.json``
files left out), a size-limited ``/tmp`` and a fixed environment: nothing of the host's.

With ``sandbox.microsandbox_api_key`` set, the VMs run on a remote microsandbox service instead
(the SDK's cloud backend, at ``sandbox.microsandbox_url`` or the SDK's default). Host paths mean
nothing there, so the agent and tools are uploaded and ``/workspace`` is a named volume on the
service, one per project.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from pydantic import SecretStr

from ..config import Settings
from ..errors import SandboxBusy, SandboxError, SandboxUnavailable
from ..paths import ensure_workspace
from .backend import AGENT_ENV, AgentSandbox
from .channel import AgentChannel, ToolHandler

AGENT_SOURCE = Path(__file__).with_name("agent.py")
REAPER_SOURCE = Path(__file__).with_name("msb_reaper.py")
LIB = "/opt/cemcp/lib"
WORKSPACE = "/workspace"
PYTHONS = ("/usr/local/bin/python3", "/usr/bin/python3", "/bin/python3")
# A healthy local microVM boots in about a second. Where nested KVM cannot run the guest, the
# runtime takes 10-40 s to report it (KVM_EXIT_INTERNAL_ERROR): wait long enough to see that.
BOOT_TIMEOUT_S = 45.0
REMOTE_BOOT_TIMEOUT_S = 120.0  # the service may schedule and pull first
PULL_TIMEOUT_S = 600.0  # an image that is not cached yet is pulled before the boot
T = TypeVar("T")
INSTALL_WAIT_S = 30.0  # another process opening or installing microsandbox holds its lock
LOG_SETTLE_S = 3.0  # the runtime's error line can land just after the SDK's error
REMOVE_WAIT_S = 20.0  # a VM that failed to boot may take a moment to be stopped
REAPER_WAIT_S = 45.0  # its kill and remove are bounded by the SDK's own timeouts
GUEST_OVERHEAD_MB = 128  # guest kernel and microsandbox's agent, beside the code's own limit
_STDERR_TAIL = 4000
# Only these reach the reaper helper: where microsandbox keeps its state and binaries.
_REAPER_ENV = ("HOME", "MSB_HOME", "MSB_PATH", "MSB_LIBKRUNFW_PATH", "LANG")


def sdk() -> ModuleType:
    """The microsandbox SDK, imported on first use: it is an optional extra."""
    try:
        import microsandbox
    except ImportError:
        raise SandboxUnavailable(
            "microsandbox: the SDK is not installed. Install it with "
            "`pip install 'cemcp[microsandbox]'` (Linux x86_64/arm64 with KVM, or macOS on "
            "Apple silicon)."
        ) from None
    return microsandbox


@dataclass(frozen=True)
class Target:
    """Where the VMs run: this host's KVM, or a remote microsandbox service."""

    url: str | None = None
    api_key: SecretStr | None = field(default=None, repr=False)

    @property
    def remote(self) -> bool:
        return self.api_key is not None

    @property
    def key(self) -> str:
        """Identifies the target without holding the secret (for the backend gate)."""
        if self.api_key is None:
            return "local"
        digest = hashlib.sha256(self.api_key.get_secret_value().encode()).hexdigest()[:16]
        return f"remote {self.url or 'default'} {digest}"

    def describe(self) -> str:
        if not self.remote:
            return "this host (KVM)"
        return f"the microsandbox service at {self.url or 'its default address'}"

    def scrub(self, text: str) -> str:
        """``text`` with the API key blanked out, for messages that echo what the SDK said."""
        if self.api_key is None:
            return text
        secret = self.api_key.get_secret_value()
        return text.replace(secret, "***") if secret else text


def target(settings: Settings) -> Target:
    s = settings.sandbox
    if s.microsandbox_api_key is None:
        if s.microsandbox_url:
            raise SandboxUnavailable(
                "microsandbox: sandbox.microsandbox_url is set but sandbox.microsandbox_api_key "
                "is not. Set the key (CEMCP_SANDBOX__MICROSANDBOX_API_KEY) to use the remote "
                "service, or unset the URL to run microVMs on this host."
            )
        return Target()
    if not s.microsandbox_api_key.get_secret_value():
        raise SandboxUnavailable("microsandbox: sandbox.microsandbox_api_key is empty.")
    return Target(url=s.microsandbox_url, api_key=s.microsandbox_api_key)


def image_label(settings: Settings) -> str:
    rootfs = settings.sandbox.rootfs
    return (
        f"root filesystem {rootfs}" if rootfs is not None else f"image {settings.sandbox.image!r}"
    )


def workspace_volume(settings: Settings) -> str:
    """The remote service's volume that is this project's /workspace."""
    digest = hashlib.sha256(str(settings.project_dir).encode()).hexdigest()[:12]
    return f"cemcp-workspace-{digest}"


def create_options(
    settings: Settings, where: Target, staging: Path | None, msb: ModuleType
) -> dict[str, Any]:
    """Keyword arguments for ``Sandbox.create``: image or rootfs, volumes, no network, limits.

    ``staging`` is the host folder with the agent and tools, mounted read-only (local only).
    """
    s = settings.sandbox
    if s.rootfs is not None:
        if where.remote:
            raise SandboxUnavailable(
                "microsandbox: sandbox.rootfs is a host folder, which a remote service cannot "
                "use. Unset it and choose an OCI image with sandbox.image."
            )
        image: Any = msb.Image.bind(str(s.rootfs))
    else:
        image = s.image
    volumes: dict[str, Any] = {"/tmp": msb.Volume.tmpfs(size_mib=s.tmp_size_mb)}
    if where.remote:
        volumes[WORKSPACE] = msb.Volume.named(workspace_volume(settings))
    else:
        ensure_workspace(settings.workspace_dir)
        volumes[WORKSPACE] = msb.Volume.bind(str(settings.workspace_dir))
        if staging is not None:
            volumes[LIB] = msb.Volume.bind(str(staging), readonly=True)
    options: dict[str, Any] = {
        "image": image,
        "memory": s.memory_mb + s.tmp_size_mb + GUEST_OVERHEAD_MB,
        "cpus": 1,
        "hostname": "sandbox",
        "workdir": WORKSPACE,
        "network": msb.Network.none(),
        "security": msb.SecurityProfile.RESTRICTED,
        "volumes": volumes,
        "labels": {"app": "cemcp"},
    }
    if not where.remote:
        # Its own session: Jupyter interrupts the kernel by SIGINT to its whole process group,
        # which would kill a VM started in that group. The reaper covers a kernel that dies.
        options["detached"] = True
    return options


def agent_command(python: str, agent_args: list[str]) -> tuple[str, list[str]]:
    return python, ["-I", "-S", f"{LIB}/cemcp_sandbox.py", "--path", LIB, *agent_args]


def stage_lib(settings: Settings, dest: Path) -> None:
    """What the sandbox may import, copied: the agent, servers/ and skills/ without any
    ``server.json`` (it may name credentials of the host's MCP sessions) or bytecode caches."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(AGENT_SOURCE, dest / "cemcp_sandbox.py")
    ignore = shutil.ignore_patterns("server.json", "__pycache__", "*.pyc")
    for folder, name in ((settings.servers_dir, "servers"), (settings.skills_dir, "skills")):
        if folder.is_dir():
            # symlinks stay links: inside the VM they point into the VM, not at host files.
            shutil.copytree(folder, dest / name, symlinks=True, ignore=ignore)


def classify(
    settings: Settings, error: str, log: list[str], timed_out: bool = False, remote: bool = False
) -> str:
    """Why a microVM did not come up, from the SDK's error and the runtime's own log lines."""
    text = "\n".join([error, *log])
    if remote and ("http error" in text or "cloud" in text.lower()):
        return (
            f"The microsandbox service did not accept the sandbox ({error}). Check "
            "sandbox.microsandbox_url, sandbox.microsandbox_api_key and the network."
        )
    if "KVM_EXIT_INTERNAL_ERROR" in text:
        nested = "nested " if _under_hypervisor() else ""
        return (
            f"The microVM did not boot: {nested}KVM refused the guest kernel "
            "(KVM_EXIT_INTERNAL_ERROR). microsandbox needs KVM that can run its guest: "
            "use a host with hardware virtualisation (or a VM whose hypervisor exposes full "
            "nested virtualisation), or a remote service (sandbox.microsandbox_api_key)."
        )
    if "/dev/kvm" in text and ("ermission denied" in text or "EACCES" in text):
        return _kvm_permission()
    if "/dev/kvm" in text and ("No such file" in text or "ENOENT" in text):
        return _no_kvm()
    if "image error" in text or "registry error" in text or "image not found" in text:
        return (
            f"The {image_label(settings)} could not be pulled ({error}). Pulling needs access "
            "to its registry; or point sandbox.rootfs at a local root filesystem with python3."
        )
    detail = f"{error}" + (f"; runtime log: {' | '.join(log[-6:])}" if log else "")
    if timed_out and not remote and log and "entering VM" in text and _under_hypervisor():
        return (
            f"The microVM did not boot within {BOOT_TIMEOUT_S:g} s: its guest kernel hung right "
            "after the VM was entered. This host runs under a hypervisor, and nested KVM that "
            "cannot run microsandbox's guest shows so (or as KVM_EXIT_INTERNAL_ERROR). Use a "
            "host with hardware virtualisation, or a remote service "
            "(sandbox.microsandbox_api_key)."
        )
    if timed_out:
        limit = REMOTE_BOOT_TIMEOUT_S if remote else BOOT_TIMEOUT_S
        return f"The microVM did not boot within {limit:g} s ({detail})"
    return f"The microVM did not boot: {detail}"


def bare_rootfs(folder: Path) -> Path:
    """A root filesystem that passes the preflight (a file named python3) and nothing more:
    enough to find out whether this host boots microsandbox's guest kernel at all."""
    (folder / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    python = folder / "usr" / "bin" / "python3"
    python.write_text("not a python: this root filesystem only reaches the boot\n")
    python.chmod(0o755)
    return folder


class _LocalState:
    """Opens microsandbox's local state once per process, in a way nothing can cut short.

    The first call through a local SDK backend opens microsandbox's database (migrating it on
    first use) under an exclusive "install" lock that it keeps for 30 minutes unless the call
    completes. A call dropped half-way (a cancelled task, a timeout, a closing event loop) leaves
    that lock, and a half-migrated database, behind; every microsandbox call on the host is then
    refused. So the process-wide default backend is made local and opened once, on a worker
    thread that runs to the end whatever happens to the task waiting for it; calls through it
    never take the lock again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = False

    async def ensure(self, msb: ModuleType) -> None:
        if not self._open:
            await asyncio.to_thread(self._open_blocking, msb)

    def _open_blocking(self, msb: ModuleType) -> None:
        with self._lock:
            if self._open:
                return
            msb.set_default_backend(msb.BackendKind.LOCAL)
            asyncio.run(_unlocked(msb.Sandbox.list))
            self._open = True


async def _unlocked(call: Callable[[], Awaitable[T]]) -> T:
    """Run an SDK call that opens the local state; while another process holds microsandbox's
    install lock, wait for it, at most INSTALL_WAIT_S, then say what blocks and what to do."""
    deadline = time.monotonic() + INSTALL_WAIT_S
    while True:
        try:
            return await call()
        except Exception as exc:
            if "install operation in progress" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise SandboxBusy(_locked_message(str(exc))) from None
        await asyncio.sleep(0.5)


def _locked_message(error: str) -> str:
    until = re.search(r"until (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", error)
    when = f"until {until.group(1)} UTC" if until else "for now"
    return (
        f"microsandbox: its local state is locked {when}, and microsandbox refuses every call "
        "meanwhile. It takes that lock while a process installs or opens it; a process killed at "
        "that moment leaves it held until it expires. Wait (`python -m cemcp_kernel doctor "
        "--refresh` checks again), or set sandbox.backend to bubblewrap for now."
    )


async def _cached(msb: ModuleType, options: dict[str, Any]) -> bool:
    """Whether the OCI image is in the local cache, i.e. the boot will not pull first."""
    try:
        await msb.Image.get(str(options["image"]))
    except msb.ImageNotFoundError:
        return False
    return True


def _under_hypervisor() -> bool:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return any(line.startswith("flags") and " hypervisor" in line for line in cpuinfo)
    except OSError:
        return False


def _no_kvm() -> str:
    return (
        "this host has no /dev/kvm: enable hardware virtualisation (in a VM: nested "
        "virtualisation), load the kvm module, or use a remote service "
        "(sandbox.microsandbox_api_key)."
    )


def _kvm_permission() -> str:
    return (
        "no permission to use /dev/kvm: add your user to its group "
        "(`sudo usermod -aG kvm $USER`, then log in again)."
    )


def check_host(settings: Settings) -> Target:
    """Checks that need no VM: SDK, KVM device, runtime binaries, rootfs. Raises with the reason."""
    where = target(settings)
    msb = sdk()
    if not where.remote:
        if sys.platform == "linux":
            if not os.path.exists("/dev/kvm"):
                raise SandboxUnavailable(f"microsandbox: {_no_kvm()}")
            if not os.access("/dev/kvm", os.R_OK | os.W_OK):
                raise SandboxUnavailable(f"microsandbox: {_kvm_permission()}")
        try:
            msb.resolve_runtime()
        except msb.MicrosandboxError as exc:
            raise SandboxUnavailable(
                f"microsandbox: its runtime (msb and libkrunfw) is missing or incomplete ({exc}). "
                "Reinstall it: `pip install --force-reinstall microsandbox`."
            ) from None
    rootfs = settings.sandbox.rootfs
    if rootfs is not None and not where.remote:
        if not rootfs.is_dir():
            raise SandboxUnavailable(f"microsandbox: sandbox.rootfs {rootfs} is not a folder.")
        if not any((rootfs / p.lstrip("/")).exists() for p in PYTHONS):
            raise SandboxUnavailable(
                f"microsandbox: sandbox.rootfs {rootfs} has no python3 in "
                "usr/local/bin, usr/bin or bin; the agent needs Python 3.8 or newer."
            )
    return where


class _BackendGate:
    """Selects the SDK's backend around calls that use the default one: the local backend,
    opened once per process (see _LocalState), or a remote service's through ``backend_scope``.

    ``backend_scope`` replaces a process-wide default, not a task-local one, so calls for
    different targets must not overlap; calls for the same target may. Handles keep the backend
    that made them, so only creation and lookups go through here.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: str | None = None
        self._users = 0
        self._scope: Any = None
        self._local = _LocalState()

    @contextlib.asynccontextmanager
    async def use(self, where: Target) -> AsyncIterator[ModuleType]:
        msb = sdk()
        while True:
            with self._lock:
                if self._users == 0:
                    if where.api_key is not None:
                        self._scope = msb.backend_scope(
                            msb.BackendKind.CLOUD,
                            url=where.url,
                            api_key=where.api_key.get_secret_value(),
                        )
                        self._scope.__enter__()
                    self._key = where.key
                if self._key == where.key:
                    self._users += 1
                    break
            await asyncio.sleep(0.05)
        try:
            if where.api_key is None:  # no remote scope is active now: the default is in use
                await self._local.ensure(msb)
            yield msb
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    scope, self._scope, self._key = self._scope, None, None
                    if scope is not None:
                        scope.__exit__(None, None, None)


GATE = _BackendGate()


class MicrosandboxSandbox(AgentSandbox):
    backend = "microsandbox"
    isolation = (
        "microVM (microsandbox: libkrun on KVM, its own guest kernel): no network interface, "
        "read-only tools, private /tmp"
    )

    def __init__(self, settings: Settings, tool_handler: ToolHandler | None = None) -> None:
        super().__init__(settings.sandbox, tool_handler)
        self.settings = settings
        self.name = f"cemcp-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        self._target: Target | None = None
        self._vm: Any = None
        self._booting = False
        self._handle: Any = None
        self._sink: Any = None
        self._staging: Path | None = None
        self._reaper: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr = bytearray()
        self._write_lock = asyncio.Lock()

    @classmethod
    async def preflight(cls, settings: Settings) -> None:
        """Refuse without booting when a VM cannot work; never pull an image in a probe."""
        where = check_host(settings)
        if where.remote or settings.sandbox.rootfs is not None:
            return
        async with GATE.use(where) as msb:
            try:
                await msb.Image.get(settings.sandbox.image)
            except msb.ImageNotFoundError:
                raise SandboxUnavailable(
                    f"microsandbox: the image {settings.sandbox.image!r} is not in its local "
                    f"cache, and a probe does not download images. Pull it once (`msb pull "
                    f"{settings.sandbox.image}`), or set sandbox.rootfs to a local root "
                    "filesystem; then `python -m cemcp_kernel doctor --refresh`."
                ) from None

    # --- launch --------------------------------------------------------------------------------

    async def _launch(self, channel_factory: type[AgentChannel]) -> AgentChannel:
        where = self._target = check_host(self.settings)
        try:
            self._staging = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
            stage_lib(self.settings, self._staging)
            await self._start_reaper(where)
            self._vm = await self._boot(where)
            if where.remote:
                await self._upload_lib()
            python = await self._find_python()
            await self._start_agent(python)
        except SandboxError:
            raise
        except (OSError, ValueError, TypeError) as exc:
            raise SandboxError(
                f"The microVM could not be set up: {where.scrub(str(exc))}"
            ) from None
        except Exception as exc:  # the SDK's own errors
            raise SandboxError(where.scrub(f"{type(exc).__name__}: {exc}")) from None
        assert self._sink is not None
        sink = self._sink

        async def write(data: bytes) -> None:
            async with self._write_lock:
                try:
                    await sink.write(data)
                except Exception as exc:  # the SDK's errors: the channel turns OSError into gone
                    raise OSError(where.scrub(str(exc))) from None

        channel = channel_factory(write, self.tool_handler)
        self._tasks = [asyncio.get_running_loop().create_task(self._pump(channel))]
        return channel

    async def _boot(self, where: Target) -> Any:
        async with GATE.use(where) as msb:
            options = create_options(self.settings, where, self._staging, msb)
            timeout = REMOTE_BOOT_TIMEOUT_S if where.remote else BOOT_TIMEOUT_S
            self._booting = True
            try:
                if where.remote:
                    await self._ensure_volume(msb)
                elif self.settings.sandbox.rootfs is None and not await _cached(msb, options):
                    timeout += PULL_TIMEOUT_S
                return await asyncio.wait_for(msb.Sandbox.create(self.name, **options), timeout)
            except asyncio.TimeoutError:
                log = await self._boot_log(msb)
                reason = classify(self.settings, "", log, timed_out=True, remote=where.remote)
            except msb.MicrosandboxError as exc:
                error = where.scrub(str(exc))
                log = await self._boot_log(msb)
                reason = classify(self.settings, error, log, remote=where.remote)
            if await self._remove_record(msb):
                self._booting = False  # else _terminate tries again, then the reaper
        raise SandboxError(f"{reason} [{where.describe()}]")

    async def _ensure_volume(self, msb: ModuleType) -> None:
        name = workspace_volume(self.settings)
        try:
            await msb.Volume.get(name)
        except msb.VolumeNotFoundError:
            await msb.Volume.create(name, labels={"app": "cemcp"})

    async def _boot_log(self, msb: ModuleType) -> list[str]:
        """The runtime's diagnostic lines of a VM that failed: the SDK's error rarely says why.

        The runtime may write its error line a moment after the SDK has reported the failure,
        so the log is read again for up to LOG_SETTLE_S until it holds an ERROR line."""
        deadline = time.monotonic() + LOG_SETTLE_S
        while True:
            try:
                handle = await msb.Sandbox.get(self.name)
                entries = await handle.logs(tail=40, sources=[msb.LogReadSource.SYSTEM])
            except Exception:  # no record (never created), or a backend without bounded reads
                return []
            lines = [entry.text().strip() for entry in entries]
            lines = [line for line in lines if line and not line.startswith("---")]
            if any("ERROR" in line for line in lines) or time.monotonic() > deadline:
                return lines
            await asyncio.sleep(0.25)

    async def _remove_record(self, msb: ModuleType) -> bool:
        """Remove this VM's record. After a failed or cancelled boot the runtime may still be
        stopping the VM, so stop it and retry for a bounded time; False if it stayed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REMOVE_WAIT_S
        while True:
            try:
                handle = await msb.Sandbox.get(self.name)
            except msb.SandboxNotFoundError:
                return True
            except msb.MicrosandboxError:
                return False
            try:
                if str(handle.status) not in ("stopped", "crashed"):
                    await handle.kill(timeout=10)
                await handle.remove()
                return True
            except msb.MicrosandboxError:
                if loop.time() > deadline:
                    return False
                await asyncio.sleep(0.25)

    async def _upload_lib(self) -> None:
        assert self._staging is not None and self._vm is not None
        fs = self._vm.fs
        await fs.mkdir(LIB)
        for path in sorted(self._staging.rglob("*")):
            target_path = f"{LIB}/{path.relative_to(self._staging).as_posix()}"
            if path.is_dir() and not path.is_symlink():
                await fs.mkdir(target_path)
            elif path.is_file() and not path.is_symlink():
                await fs.write(target_path, path.read_bytes())

    async def _find_python(self) -> str:
        for candidate in PYTHONS:
            if await self._vm.fs.exists(candidate):
                return candidate
        raise SandboxError(
            f"The {image_label(self.settings)} has no python3 in /usr/local/bin, /usr/bin or "
            "/bin; the agent needs Python 3.8 or newer in the image."
        )

    async def _start_agent(self, python: str) -> None:
        msb = sdk()
        command, args = agent_command(python, self.agent_args())
        self._handle = await self._vm.exec_stream(
            command, args, cwd=WORKSPACE, env=dict(AGENT_ENV), stdin=msb.Stdin.pipe()
        )
        self._sink = self._handle.take_stdin()
        if self._sink is None:
            raise SandboxError("microsandbox gave the agent no stdin to write frames to")

    async def _start_reaper(self, where: Target) -> None:
        env = {k: os.environ[k] for k in _REAPER_ENV if k in os.environ}
        self._reaper = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            str(REAPER_SOURCE),
            self.name,  # not needed, but it names the helper in the process table
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        config = {
            "name": self.name,
            "staging": str(self._staging) if self._staging else None,
            "url": where.url,
            "api_key": where.api_key.get_secret_value() if where.api_key else None,
        }
        assert self._reaper.stdin is not None
        self._reaper.stdin.write(json.dumps(config).encode() + b"\n")
        await self._reaper.stdin.drain()

    # --- running -------------------------------------------------------------------------------

    async def _pump(self, channel: AgentChannel) -> None:
        msb = sdk()
        handle = self._handle
        reason = "the agent's output ended"
        try:
            while (event := await handle.recv()) is not None:
                kind = str(event.event_type)
                if kind == msb.ExecEventType.STDOUT and event.data:
                    channel.feed(bytes(event.data))
                elif kind == msb.ExecEventType.STDERR and event.data:
                    if len(self._stderr) < 4 * _STDERR_TAIL:
                        self._stderr += bytes(event.data)
                elif kind == msb.ExecEventType.EXITED:
                    reason = f"the agent exited with code {event.code}"
                    break
                elif kind in (msb.ExecEventType.FAILED, msb.ExecEventType.STDIN_ERROR):
                    reason = f"the agent's process failed ({kind})"
                    break
        except Exception as exc:  # the SDK's errors: the VM or its channel went away
            reason = f"the microVM went away ({exc})"
        text = self._stderr.decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
        channel.close(reason + (f": {text}" if text else ""))

    async def _terminate(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        clean = True
        sink, self._sink = self._sink, None
        if sink is not None:
            with contextlib.suppress(Exception):
                await sink.close()
        vm, self._vm = self._vm, None
        where = self._target
        if vm is not None:
            # A remote service offers a graceful stop only; locally, kill: nothing is kept.
            stop = vm.stop if where is not None and where.remote else vm.kill
            try:
                await stop(timeout=10)
                await vm.remove()
            except Exception:
                clean = False
        elif self._booting and where is not None:
            # Cancelled while booting: the SDK stopped the VM, its record may remain.
            try:
                async with GATE.use(where) as msb:
                    clean = await self._remove_record(msb)
            except Exception:
                clean = False
        self._booting = False
        staging, self._staging = self._staging, None
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            # "done" lets it exit; without it, it kills and removes the VM itself.
            if reaper.stdin is not None and not reaper.stdin.is_closing():
                with contextlib.suppress(OSError, RuntimeError):
                    if clean:
                        reaper.stdin.write(b"done\n")
                        await reaper.stdin.drain()
                reaper.stdin.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(reaper.wait(), REAPER_WAIT_S)
