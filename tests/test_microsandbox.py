"""The microsandbox backend against the real SDK and runtime.

Everything up to the boot runs everywhere the wheel installs: configuration mapping, the staged
tool tree, the runtime binaries, key handling, the probe's refusal and its reason, cleanup after
failed, cancelled and orphaned boots. The tests that need a running microVM skip, with the
probe's reason, on hosts where none boots (here: nested KVM refuses the guest kernel).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cemcp_kernel.config import Settings, load_settings
from cemcp_kernel.doctor import diagnose
from cemcp_kernel.engine import Engine
from cemcp_kernel.errors import SandboxError, SandboxUnavailable
from cemcp_kernel.sandbox import backend_class
from cemcp_kernel.sandbox.microsandbox import (
    AGENT_ENV,
    GATE,
    LIB,
    MicrosandboxSandbox,
    Target,
    agent_command,
    bare_rootfs,
    check_host,
    create_options,
    stage_lib,
    target,
)
from cemcp_kernel.sandbox.probe import STRENGTH, BackendReport, choose, run_probe

from .conftest import ROOT, SECRET_KEY, loopback_listener

msb = pytest.importorskip("microsandbox")

OWN = f"cemcp-{os.getpid()}-"  # every sandbox this test process makes is named so
MSB_KEY = "msb_cemcp_test_key_9f8e7d6c5b4a"


def settings_for(workspace: Path, **overrides: object) -> Settings:
    return load_settings(ROOT, workspace_dir=str(workspace), sandbox__pool_size=1, **overrides)


def processes(prefix: str = OWN) -> list[str]:
    """VM processes (``msb machine --name NAME``) and reaper helpers (``msb_reaper.py NAME``)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if f"--name {prefix}" in cmd or f"msb_reaper.py {prefix}" in cmd:
            found.append(f"process {proc.name}: {cmd}")
    return found


def leftovers(prefix: str = OWN) -> list[str]:
    """Processes, sandbox records and staging folders of ours still around."""
    found = processes(prefix)

    async def records() -> list[str]:
        async with GATE.use(Target()) as sdk:  # the process's local backend, opened once
            page = await sdk.Sandbox.list()
        return [
            f"record {h.name} ({h.status})" for h in page.sandboxes if h.name.startswith(prefix)
        ]

    found += asyncio.run(records())
    found += [f"staging {p}" for p in Path(tempfile.gettempdir()).glob(f"{prefix}*")]
    return found


def kvm_refused(reason: str) -> bool:
    """Both ways this host's nested KVM refuses microsandbox's guest kernel."""
    return "KVM_EXIT_INTERNAL_ERROR" in reason or "guest kernel hung" in reason


def wait_until_clean(prefix: str = OWN, within: float = 60.0) -> list[str]:
    deadline = time.monotonic() + within
    while (found := leftovers(prefix)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


@pytest.fixture(scope="module")
def bare_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root = tmp_path_factory.mktemp("msb")
    (root / "workspace").mkdir()
    return settings_for(root / "workspace", sandbox__rootfs=str(bare_rootfs(root / "rootfs")))


@pytest.fixture(scope="module")
def bare_reports(bare_settings: Settings) -> dict[str, BackendReport]:
    """The real probe, once, on this host: microsandbox boots a VM on the bare rootfs."""
    return {r.name: r for r in run_probe(bare_settings, refresh=True)}


# --- configuration -------------------------------------------------------------------------------


def test_an_image_maps_to_a_microvm_without_network_with_the_workspace_and_tools(
    workspace: Path, tmp_path: Path
) -> None:
    settings = settings_for(workspace, sandbox__memory_mb=512, sandbox__tmp_size_mb=64)
    options = create_options(settings, Target(), tmp_path, msb)
    assert options["image"] == "python"
    policy = options["network"].policy
    assert (policy.default_egress, policy.default_ingress) == (msb.Action.DENY, msb.Action.DENY)
    assert policy.rules == ()
    volumes = options["volumes"]
    assert set(volumes) == {"/workspace", LIB, "/tmp"}
    assert (volumes["/workspace"].kind, volumes["/workspace"].bind) == ("bind", str(workspace))
    assert not volumes["/workspace"].readonly
    assert (volumes[LIB].bind, volumes[LIB].readonly) == (str(tmp_path), True)
    assert (volumes["/tmp"].kind, volumes["/tmp"].size_mib) == ("tmpfs", 64)
    assert options["memory"] > 512 + 64  # the code's limit, /tmp, and the guest itself
    assert options["security"] == msb.SecurityProfile.RESTRICTED
    assert options["detached"] is True  # out of the kernel's process group: see the module doc
    assert "env" not in options  # nothing of the host's environment
    msb.Network.none()._to_dict()  # the SDK accepts what we built
    for mount in volumes.values():
        mount._to_dict()


def test_a_rootfs_folder_replaces_the_image(workspace: Path, tmp_path: Path) -> None:
    rootfs = bare_rootfs(tmp_path / "rootfs")
    settings = settings_for(workspace, sandbox__rootfs=str(rootfs))
    image = create_options(settings, Target(), None, msb)["image"]
    assert (image._type, image._path) == (msb.ImageSourceKind.BIND, str(rootfs))
    relative = load_settings(ROOT, sandbox__rootfs="some/rootfs").sandbox.rootfs
    assert relative == ROOT / "some" / "rootfs"  # relative to the project, like workspace_dir


def test_the_agent_runs_isolated_with_a_fixed_environment() -> None:
    command, args = agent_command("/usr/local/bin/python3", ["--memory-mb", "512"])
    assert command == "/usr/local/bin/python3"
    assert args == ["-I", "-S", f"{LIB}/cemcp_sandbox.py", "--path", LIB, "--memory-mb", "512"]
    assert set(AGENT_ENV) == {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "PYTHONIOENCODING",
        "PYTHONDONTWRITEBYTECODE",
        "MPLBACKEND",
        "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    }


def test_the_tool_tree_is_staged_without_server_json_and_without_following_links(
    workspace: Path, tmp_path: Path
) -> None:
    servers = tmp_path / "servers"
    (servers / "crm").mkdir(parents=True)
    (servers / "crm" / "find.py").write_text("def find(): ...\n")
    (servers / "crm" / "server.json").write_text('{"env": {"TOKEN": "secret"}}')
    (servers / "crm" / "passwd.py").symlink_to("/etc/passwd")
    settings = settings_for(workspace, servers_dir=str(servers))
    stage_lib(settings, tmp_path / "lib")
    lib = tmp_path / "lib"
    assert (lib / "cemcp_sandbox.py").read_text().startswith('"""The agent inside every sandbox')
    assert (lib / "servers" / "crm" / "find.py").is_file()
    assert not (lib / "servers" / "crm" / "server.json").exists()
    link = lib / "servers" / "crm" / "passwd.py"
    assert link.is_symlink() and os.readlink(link) == "/etc/passwd"  # resolved inside the VM
    assert (lib / "skills").is_dir()


def test_the_remote_service_is_selected_by_key_and_url(workspace: Path) -> None:
    settings = settings_for(
        workspace,
        sandbox__microsandbox_url="https://msb.example.test",
        sandbox__microsandbox_api_key=MSB_KEY,
    )
    where = target(settings)
    assert where.remote and where.url == "https://msb.example.test"
    options = create_options(settings, where, None, msb)
    assert options["volumes"]["/workspace"].kind == "named"  # host paths mean nothing there
    assert LIB not in options["volumes"] and "detached" not in options
    assert target(settings_for(workspace)).remote is False
    with pytest.raises(SandboxUnavailable, match="microsandbox_api_key"):
        target(settings_for(workspace, sandbox__microsandbox_url="https://msb.example.test"))
    remote_rootfs = settings.updated({"sandbox.rootfs": str(workspace)})
    with pytest.raises(SandboxUnavailable, match="remote service cannot use"):
        create_options(remote_rootfs, where, None, msb)


def test_the_api_key_never_reaches_the_sandbox_a_repr_a_message_or_a_log(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there: the service refuses at once
    settings = settings_for(
        workspace, sandbox__microsandbox_url=url, sandbox__microsandbox_api_key=MSB_KEY
    )
    where = target(settings)
    shown = [repr(where), repr(settings.sandbox), json.dumps(settings.public_dump())]
    shown.append(repr(create_options(settings, where, None, msb)))
    sandbox = MicrosandboxSandbox(settings)
    shown.append(repr(vars(sandbox)))
    caplog.set_level("DEBUG")

    async def start() -> str:
        with pytest.raises(SandboxError) as failure:
            await sandbox.start()
        return str(failure.value)

    message = asyncio.run(start())
    assert "did not accept the sandbox" in message and url in message
    shown += [message, caplog.text]
    assert not [text for text in shown if MSB_KEY in text]
    assert MSB_KEY not in json.dumps(AGENT_ENV)


def test_the_reaper_gets_the_key_through_its_pipe_only(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)  # the kernel's own secrets stay too
    settings = settings_for(
        workspace,
        sandbox__microsandbox_url="http://127.0.0.1:9",
        sandbox__microsandbox_api_key=MSB_KEY,
    )
    sandbox = MicrosandboxSandbox(settings)

    async def inspect() -> tuple[bytes, bytes]:
        await sandbox._start_reaper(target(settings))
        assert sandbox._reaper is not None
        proc = Path(f"/proc/{sandbox._reaper.pid}")
        seen = (proc / "cmdline").read_bytes(), (proc / "environ").read_bytes()
        await sandbox._terminate()
        return seen

    cmdline, environ = asyncio.run(inspect())
    assert b"msb_reaper.py" in cmdline
    assert MSB_KEY.encode() not in cmdline + environ
    assert SECRET_KEY.encode() not in environ


# --- runtime and host checks --------------------------------------------------------------------


def test_the_bundled_runtime_resolves_and_runs() -> None:
    runtime = msb.resolve_runtime()
    assert Path(runtime.msb_path).is_file() and Path(runtime.libkrunfw_path).is_file()
    version = subprocess.run(
        [runtime.msb_path, "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0, version.stderr
    assert msb.version() in version.stdout


def test_preflight_refuses_an_image_that_is_not_pulled_yet(workspace: Path) -> None:
    settings = settings_for(workspace, sandbox__image="cemcp-test/never-pulled:1")
    with pytest.raises(SandboxUnavailable, match=r"not in its local cache.*msb pull"):
        asyncio.run(MicrosandboxSandbox.preflight(settings))


# --- microsandbox's own lock on its local state ------------------------------------------------

# Runs in a fresh process (microsandbox opens its state once per process) on a fresh state folder.
PREFLIGHT = """
import asyncio, contextlib, json, sys
import cemcp_kernel.sandbox.microsandbox as m
from cemcp_kernel.config import load_settings
from cemcp_kernel.errors import SandboxUnavailable
from cemcp_kernel.sandbox.probe import probe_all
m.INSTALL_WAIT_S = 1.0
from pathlib import Path
settings = load_settings(Path(sys.argv[1]), workspace_dir=sys.argv[2], sandbox__image="cemcp-never-pulled")

async def cut(delay):
    task = asyncio.ensure_future(m.MicrosandboxSandbox.preflight(settings))
    await asyncio.sleep(delay)
    task.cancel()
    with contextlib.suppress(BaseException):
        await task

if sys.argv[3] == "probe":
    print(json.dumps([r.model_dump() for r in asyncio.run(probe_all(settings))]))
elif sys.argv[3] == "preflight":
    try:
        asyncio.run(m.MicrosandboxSandbox.preflight(settings))
    except SandboxUnavailable as exc:
        print(exc)
else:
    asyncio.run(cut(float(sys.argv[3])))
"""


def in_state(home: Path, workspace: Path, *args: str) -> str:
    env = {**os.environ, "MSB_HOME": str(home), "CEMCP_CACHE_DIR": str(home / "cemcp-cache")}
    done = subprocess.run(
        [sys.executable, "-c", PREFLIGHT, str(ROOT), str(workspace), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("delay", [i / 100 for i in range(13)])
def test_a_call_cut_short_while_microsandbox_opens_its_state_leaves_it_usable(
    delay: float, workspace: Path
) -> None:
    """The first call opens (and on first use migrates) microsandbox's database under a lock it
    keeps for 30 minutes unless the call completes; a cancelled call must not leave either half
    done, or every later microsandbox call on the host is refused."""
    with tempfile.TemporaryDirectory(prefix="cemcp-msb-") as home:
        in_state(Path(home), workspace, str(delay))
        answer = in_state(Path(home), workspace, "preflight")
    assert "'cemcp-never-pulled' is not in its local cache" in answer, answer


def test_a_held_lock_is_a_clear_refusal_that_auto_asks_again_next_time(workspace: Path) -> None:
    """A process killed while microsandbox opens its state leaves the lock held (microsandbox
    does not check that the holder lives): written here as such a process leaves it."""
    import sqlite3

    with tempfile.TemporaryDirectory(prefix="cemcp-msb-") as name:
        home = Path(name)
        in_state(home, workspace, "preflight")  # creates the state as any first use does
        until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=30)
        with contextlib.closing(sqlite3.connect(home / "db" / "msb.db")) as db, db:
            db.execute(
                "UPDATE maintenance_lease SET holder_pid = 4194999, last_completed_at = NULL, "
                "lease_expires_at = ? WHERE name = 'install_exclusive'",
                (until.strftime("%Y-%m-%d %H:%M:%S.%f000"),),  # as microsandbox writes it
            )
        reports = {r["name"]: r for r in json.loads(in_state(home, workspace, "probe"))}
        assert not (home / "cemcp-cache" / "probe.json").exists()  # asked again next time
    refusal = reports["microsandbox"]
    assert not refusal["works"] and not refusal["lasting"]
    assert f"its local state is locked until {until:%Y-%m-%d %H:%M:%S} UTC" in refusal["reason"]
    assert "set sandbox.backend to bubblewrap" in refusal["reason"]
    assert reports["bubblewrap"]["works"], reports["bubblewrap"]["reason"]


def test_preflight_checks_the_rootfs(workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SandboxUnavailable, match="has no python3"):
        check_host(settings_for(workspace, sandbox__rootfs=str(tmp_path / "empty")))
    with pytest.raises(SandboxUnavailable, match="is not a folder"):
        check_host(settings_for(workspace, sandbox__rootfs=str(tmp_path / "missing")))


def test_an_unreachable_registry_is_a_clear_failure_to_start(workspace: Path) -> None:
    """An explicit microsandbox backend pulls the image; without a registry it says so."""
    settings = settings_for(workspace, sandbox__image="cemcp-test/never-pulled:1")

    async def start() -> str:
        with pytest.raises(SandboxError) as failure:
            await MicrosandboxSandbox(settings).start()
        return str(failure.value)

    message = asyncio.run(start())
    assert "could not be pulled" in message or "did not boot" in message, message
    assert wait_until_clean() == []


# --- the boot on this host ----------------------------------------------------------------------


def test_microsandbox_is_probed_first() -> None:
    assert STRENGTH[0] == "microsandbox"
    assert backend_class("microsandbox") is MicrosandboxSandbox


def test_the_probe_says_why_the_microvm_did_not_boot(
    bare_reports: dict[str, BackendReport],
) -> None:
    report = bare_reports["microsandbox"]
    assert not report.works  # the bare rootfs cannot run the agent, wherever it boots
    assert report.reason.startswith("microsandbox: ")
    assert "microVM" in report.isolation
    if not kvm_refused(report.reason):
        pytest.skip(f"this host's KVM runs microsandbox's guest: {report.reason}")
    assert (
        "KVM refused the guest kernel (KVM_EXIT_INTERNAL_ERROR)" in report.reason
        or "guest kernel hung right after the VM was entered" in report.reason
    )
    assert "hardware virtualisation" in report.reason  # what to do about it
    assert wait_until_clean() == []


def test_a_failing_microsandbox_never_keeps_auto_from_bubblewrap(
    bare_settings: Settings,
    bare_reports: dict[str, BackendReport],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert list(bare_reports) == list(STRENGTH)
    assert bare_reports["bubblewrap"].works, bare_reports["bubblewrap"].reason
    assert asyncio.run(choose(bare_settings)) == "bubblewrap"  # from the cache: no second boot
    monkeypatch.setenv("CEMCP_CACHE_DIR", str(workspace.parent / "cache"))  # keep that cache
    broken = settings_for(workspace, sandbox__microsandbox_url="https://msb.example.test")
    reports = {r.name: r for r in run_probe(broken, refresh=True)}
    assert "microsandbox_api_key" in reports["microsandbox"].reason
    assert reports["bubblewrap"].works
    assert leftovers() == []


def test_doctor_says_microsandbox_no_and_bubblewrap_yes(
    bare_settings: Settings, bare_reports: dict[str, BackendReport]
) -> None:
    report = diagnose(bare_settings)
    works = {b.name: b.works for b in report.backends}
    assert works == {"microsandbox": False, "bubblewrap": True}
    assert report.chosen == "bubblewrap"
    text = report.text()
    assert "no  microsandbox" in text and "yes bubblewrap" in text
    assert f"why not: {bare_reports['microsandbox'].reason}" in text  # the probe's, from the cache
    if kvm_refused(bare_reports["microsandbox"].reason):
        assert "why not: microsandbox: the sandbox did not start. The microVM did not boot" in text
        assert "nested KVM" in text or "KVM refused" in text


def test_doctor_with_no_image_pulled_still_says_why_no_vm_boots_here(
    bare_settings: Settings, bare_reports: dict[str, BackendReport]
) -> None:
    """The default settings (image `python`, never pulled on this host): doctor tries the guest
    kernel on an empty root filesystem, so its answer names the real obstacle, not the image."""
    settings = bare_settings.updated(
        {"sandbox.rootfs": None, "sandbox.image": "cemcp-never-pulled"}
    )
    report = {b.name: b for b in diagnose(settings).backends}["microsandbox"]
    assert not report.works
    assert (
        "not in its local cache" in report.reason
        and "A test boot on an empty root" in report.reason
    )
    if kvm_refused(bare_reports["microsandbox"].reason):
        assert "KVM_EXIT_INTERNAL_ERROR" in report.reason
    else:
        assert "the guest kernel runs here" in report.reason or "did not boot" in report.reason


def test_a_boot_cancelled_half_way_leaves_nothing(bare_settings: Settings) -> None:
    sandbox = MicrosandboxSandbox(bare_settings)

    async def cancel_while_booting() -> None:
        task = asyncio.ensure_future(sandbox.start())
        for _ in range(200):  # until the VM exists, or the start ended on its own
            await asyncio.sleep(0.05)
            if task.done() or any("--name" in f for f in processes(sandbox.name)):
                break
        task.cancel()
        with pytest.raises((asyncio.CancelledError, SandboxError)):
            await task
        await sandbox.close()  # a second close is harmless

    asyncio.run(cancel_while_booting())
    assert wait_until_clean(sandbox.name) == []


def test_a_boot_past_its_time_limit_is_stopped_explained_and_removed(
    bare_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cemcp_kernel.sandbox import microsandbox as backend

    monkeypatch.setattr(backend, "BOOT_TIMEOUT_S", 4.0)  # shorter than any boot attempt here
    sandbox = MicrosandboxSandbox(bare_settings)

    async def start() -> str:
        with pytest.raises(SandboxError) as failure:
            await sandbox.start()
        return str(failure.value)

    message = asyncio.run(start())
    assert "did not boot within 4 s" in message, message
    if backend._under_hypervisor():
        assert "guest kernel hung right after the VM was entered" in message
    assert wait_until_clean(sandbox.name) == []


def test_a_killed_owner_leaves_nothing_behind(bare_settings: Settings, tmp_path: Path) -> None:
    """The VM runs in its own session (safe from Jupyter's SIGINT); the reaper removes it when
    its owner dies without cleaning up."""
    script = tmp_path / "owner.py"
    script.write_text(
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from cemcp_kernel.config import load_settings\n"
        "from cemcp_kernel.sandbox.microsandbox import MicrosandboxSandbox\n"
        "project, workspace, rootfs = sys.argv[1:4]\n"
        "settings = load_settings(Path(project), workspace_dir=workspace, sandbox__rootfs=rootfs)\n"
        "asyncio.run(MicrosandboxSandbox(settings).start())\n"
    )
    owner = subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(ROOT),
            str(bare_settings.workspace_dir),
            str(bare_settings.sandbox.rootfs),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    prefix = f"cemcp-{owner.pid}-"
    try:
        deadline = time.monotonic() + 60
        while not any("--name" in f for f in processes(prefix)) and owner.poll() is None:
            assert time.monotonic() < deadline, "the VM never started"
            time.sleep(0.2)
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
    assert wait_until_clean(prefix) == []


# --- a microVM that boots -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def booted(
    tmp_path_factory: pytest.TempPathFactory, bare_reports: dict[str, BackendReport]
) -> Settings:
    """Settings whose microVM boots and runs the agent here, else a skip with the reason.

    The image is sandbox.image (``python``), or the root filesystem in
    CEMCP_TEST_MICROSANDBOX_ROOTFS.
    """
    root = tmp_path_factory.mktemp("booted")
    (root / "workspace").mkdir()
    extra = {}
    if rootfs := os.environ.get("CEMCP_TEST_MICROSANDBOX_ROOTFS"):
        extra["sandbox__rootfs"] = rootfs
    settings = settings_for(root / "workspace", sandbox__backend="microsandbox", **extra)
    report = {r.name: r for r in run_probe(settings, refresh=True)}["microsandbox"]
    if not report.works:
        bare = bare_reports["microsandbox"].reason
        pytest.skip(f"no microVM boots here: {report.reason} (with a bare root filesystem: {bare})")
    return settings


@pytest.fixture
def vm(booted: Settings) -> Iterator[Engine]:
    with Engine(booted) as engine:
        yield engine


def test_code_runs_under_its_own_kernel(vm: Engine) -> None:
    assert vm.execute("1 + 1").value.data == 2
    guest = vm.execute("import platform\nplatform.release()").value.data
    assert guest != os.uname().release
    assert vm.execute("from servers.calculator.add import add\nadd(2, 3)").value.data == 5


def test_the_workspace_round_trips(vm: Engine, booted: Settings) -> None:
    (booted.workspace_dir / "in.txt").write_text("from the host")
    assert vm.execute("open('/workspace/in.txt').read()").value.data == "from the host"
    assert vm.execute("open('/workspace/out.txt', 'w').write('from the vm')").ok
    assert (booted.workspace_dir / "out.txt").read_text() == "from the vm"


def test_there_is_no_network(vm: Engine) -> None:
    with loopback_listener() as listener:
        result = vm.execute(
            f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), timeout=3)"
        )
        assert result.error is not None and result.error.ename in (
            "ConnectionRefusedError",
            "OSError",
            "TimeoutError",
        )
        result = vm.execute("import socket\nsocket.getaddrinfo('pypi.org', 443)")
        assert result.error is not None and result.error.ename == "gaierror"
        interfaces = vm.execute("import socket\n[n for _, n in socket.if_nameindex()]")
        assert interfaces.value.data == ["lo"]
        assert listener.accepted == []


def test_the_environment_holds_nothing_of_the_host(
    booted: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    with Engine(booted) as engine:
        check = (
            "import os, glob\n"
            f"key = {SECRET_KEY!r}.encode()\n"
            "hits = [p for p in glob.glob('/proc/*/environ') if key in open(p, 'rb').read()]\n"
            "hits + [k for k, v in os.environ.items() if v.encode() == key]"
        )
        assert engine.execute(check).value.data == []
        names = set(engine.execute("import os\nsorted(os.environ)").value.data)
        assert "OPENAI_API_KEY" not in names and set(AGENT_ENV) <= names


def test_tools_are_read_only_and_server_json_is_absent(vm: Engine) -> None:
    result = vm.execute(f"open('{LIB}/servers/calculator/add.py', 'a').write('x')")
    assert result.error is not None and result.error.ename in ("OSError", "PermissionError")
    found = vm.execute(f"import glob\nglob.glob('{LIB}/servers/*/server.json')")
    assert found.value.data == []
