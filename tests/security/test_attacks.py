"""Attempts from inside the sandbox, each contained (see the `contained` fixture for what is
checked after every one). Code is run with `%%mcp --code`, so no guardrail stands in the way:
the sandbox alone must hold."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ..conftest import ROOT
from .conftest import SECRET, Host


def assert_error(cell, *names: str) -> str:
    assert cell.status == "error", cell.text()
    text = cell.text()
    assert any(name in text for name in names), text
    assert SECRET not in text
    return text


# --- reading the host ----------------------------------------------------------------------


def test_home_folder_is_absent(contained: Host) -> None:
    cell = contained.attempt(f"import os\nos.listdir({str(Path.home())!r})")
    assert_error(cell, "FileNotFoundError")


def test_etc_shadow_is_absent(contained: Host) -> None:
    assert_error(contained.attempt("open('/etc/shadow').read()"), "FileNotFoundError")


def test_host_passwd_is_replaced(contained: Host) -> None:
    cell = contained.attempt("open('/etc/passwd').read()")
    assert cell.results() == ["'sandbox:x:1000:1000:sandbox:/tmp:/bin/false\\n'"]


def test_project_env_file_is_absent(contained: Host) -> None:
    for path in (contained.project / ".env", Path("/workspace/../.env")):
        assert_error(contained.attempt(f"open({str(path)!r}).read()"), "FileNotFoundError")


def test_private_host_file_is_absent(contained: Host) -> None:
    cell = contained.attempt(f"open({str(contained.private_file)!r}).read()")
    assert_error(cell, "FileNotFoundError")


def test_kernel_connection_file_is_absent(contained: Host) -> None:
    path = contained.kernel.manager.connection_file
    assert_error(contained.attempt(f"open({path!r}).read()"), "FileNotFoundError")


def test_server_json_credentials_are_masked(contained: Host) -> None:
    code = (
        "import glob\nseen = {}\n"
        "for p in glob.glob('/opt/cemcp/lib/servers/*/server.json'):\n"
        "    try:\n        seen[p] = open(p).read()\n"
        "    except OSError as exc:\n        seen[p] = type(exc).__name__\nseen"
    )
    seen = ast.literal_eval(contained.attempt(code).results()[0])
    assert "/opt/cemcp/lib/servers/secretive/server.json" in seen
    assert set(seen.values()) == {"PermissionError"}


# --- the kernel's environment ----------------------------------------------------------------


def test_environment_has_no_secret(contained: Host) -> None:
    cell = contained.attempt(f"import os\n[k for k, v in os.environ.items() if {SECRET!r} in v]")
    assert cell.results() == ["[]"]


def test_proc_environ_of_every_visible_process_has_no_secret(contained: Host) -> None:
    code = (
        "import glob\nfound = []\n"
        "for p in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline')"
        " + glob.glob('/proc/*/mountinfo'):\n"
        "    try:\n"
        f"        found += [p] if {SECRET!r}.encode() in open(p, 'rb').read() else []\n"
        "    except OSError:\n        pass\nfound"
    )
    assert contained.attempt(code).results() == ["[]"]


def test_kernel_process_is_invisible(contained: Host) -> None:
    pid = contained.kernel.pid
    assert_error(contained.attempt(f"open('/proc/{pid}/environ').read()"), "FileNotFoundError")


def test_only_sandbox_processes_are_visible(contained: Host) -> None:
    cell = contained.attempt(
        "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())"
    )
    assert cell.results() == ["[1, 2]"]  # bwrap's reaper and the agent


# --- the network ----------------------------------------------------------------------------


def test_loopback_server_of_the_host_is_unreachable(contained: Host) -> None:
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {contained.listener_port}), 2)"
    assert_error(contained.attempt(code), "ConnectionRefusedError")


def test_dns_does_not_resolve(contained: Host) -> None:
    assert_error(contained.attempt("import socket\nsocket.gethostbyname('pypi.org')"), "gaierror")


def test_outside_addresses_are_unreachable(contained: Host) -> None:
    code = "import socket\nsocket.create_connection(('1.1.1.1', 53), 2)"
    assert_error(contained.attempt(code), "Network is unreachable", "OSError")


# --- writing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/usr/cemcp-was-here", "/opt/cemcp/lib/servers/calculator/add.py", "/etc/cemcp"]
)
def test_writes_outside_the_workspace_fail(contained: Host, path: str) -> None:
    assert_error(contained.attempt(f"open({path!r}, 'w').write('x')"), "OSError", "PermissionError")


def test_tmp_is_private_to_the_sandbox(contained: Host) -> None:
    cell = contained.attempt("open('/tmp/cemcp-private-probe', 'w').write('x')")
    assert cell.status == "ok"
    assert not Path("/tmp/cemcp-private-probe").exists()


def test_symlink_out_of_the_workspace_leads_nowhere(contained: Host) -> None:
    # A host file outside /tmp (the sandbox has a /tmp of its own): the project's pyproject.toml.
    target = str(ROOT / "pyproject.toml")
    code = (
        f"import os\nos.symlink({target!r}, '/workspace/escape')\nopen('/workspace/escape').read()"
    )
    assert_error(contained.attempt(code), "FileNotFoundError")
    (contained.workspace / "escape").unlink()


def test_dotdot_does_not_leave_the_workspace(contained: Host) -> None:
    cell = contained.attempt("import os\nsorted(os.listdir('/workspace/../..'))")
    assert cell.status == "ok"
    assert "project" not in cell.text() and ".env" not in cell.text()


def test_planted_symlink_cannot_redirect_the_hosts_session_log(contained: Host) -> None:
    victim = contained.private_file
    code = (
        "import os, shutil\n"
        "shutil.rmtree('/workspace/sessions', ignore_errors=True)\n"
        f"os.symlink({str(victim.parent)!r}, '/workspace/sessions')"
    )
    contained.attempt(code)
    contained.attempt("'the host now records this turn'")
    assert "the host now records" not in victim.read_text()
    assert not (victim.parent / "default.jsonl").exists()
    (contained.workspace / "sessions").unlink()


# --- processes ----------------------------------------------------------------------------------


def test_signalling_the_kernel_fails(contained: Host) -> None:
    code = f"import os, signal\nos.kill({contained.kernel.pid}, signal.SIGKILL)"
    assert_error(contained.attempt(code), "ProcessLookupError")


def test_kill_everything_reaches_nothing(contained: Host) -> None:
    # kill(-1) spares the caller and pid 1 (bwrap's reaper): nothing else exists to be hit
    cell = contained.attempt("import os, signal\nos.kill(-1, signal.SIGKILL)")
    assert_error(cell, "ProcessLookupError")


def test_ptrace_of_the_kernel_fails(contained: Host) -> None:
    code = (
        "import ctypes, ctypes.util, os\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)\n"
        f"result = libc.ptrace(16, {contained.kernel.pid}, 0, 0)\n"  # PTRACE_ATTACH
        "(result, os.strerror(ctypes.get_errno()))"
    )
    assert contained.attempt(code).results() == ["(-1, 'No such process')"]


def test_new_user_namespaces_are_refused(contained: Host) -> None:
    code = (
        "import ctypes, ctypes.util, os\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)\n"
        "result = libc.unshare(0x10000000)\n"  # CLONE_NEWUSER
        "(result, os.strerror(ctypes.get_errno()))"
    )
    cell = contained.attempt(code)
    assert cell.results()[0].startswith("(-1, ")


def test_becoming_root_fails(contained: Host) -> None:
    # uid 0 is not even mapped in the sandbox's user namespace
    assert_error(
        contained.attempt("import os\nos.setuid(0)"), "PermissionError", "Invalid argument"
    )


def test_raising_the_memory_limit_fails(contained: Host) -> None:
    code = "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))"
    assert_error(contained.attempt(code), "ValueError", "PermissionError")


def test_host_devices_are_absent(contained: Host) -> None:
    cell = contained.attempt("import os\nsorted(os.listdir('/dev'))")
    assert cell.status == "ok" and "null" in cell.text()
    assert "kvm" not in cell.text() and "sda" not in cell.text() and "vda" not in cell.text()


# --- exhaustion ---------------------------------------------------------------------------------


def test_fork_bomb(contained: Host) -> None:
    code = "import os\nwhile True:\n    os.fork()"
    text = assert_error(contained.attempt(code, timeout=90), "processes", "longer than")
    assert "fresh sandbox" in text


def test_memory_bomb(contained: Host) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 * 1024))"
    text = assert_error(contained.attempt(code), "MiB of memory")
    assert "fresh sandbox" in text


def test_filling_tmp(contained: Host) -> None:
    code = (
        "with open('/tmp/fill', 'wb') as f:\n    while True:\n        f.write(b'x' * 1024 * 1024)"
    )
    assert_error(contained.attempt(code), "No space left on device")


def test_infinite_loop(contained: Host) -> None:
    text = assert_error(contained.attempt("while True:\n    pass"), "longer than 5 s")
    assert "--timeout" in text


def test_huge_output_is_capped(contained: Host) -> None:
    cell = contained.attempt("for i in range(10**6):\n    print('x' * 100)")
    assert cell.status == "ok"
    shown = sum(
        len(o["content"].get("text", "")) for o in cell.outputs if o["msg_type"] == "stream"
    )
    assert shown <= 1_000_000
    assert "Output was cut" in cell.text()


# --- the agent channel --------------------------------------------------------------------------


def test_garbage_on_the_agent_channel(contained: Host) -> None:
    code = (
        "import os\n"
        "for fd in range(3, 10):\n"
        "    try:\n"
        "        os.write(fd, b'\\xff\\xff\\xff\\x7f garbage that is not a frame')\n"
        "    except OSError:\n"
        "        pass\n"
        "import time\ntime.sleep(3)"
    )
    text = assert_error(contained.attempt(code), "garbage", "oversized")
    assert "fresh sandbox" in text


def test_agent_killed_mid_execution(contained: Host) -> None:
    code = (
        "import os, signal\nprint('about to die', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)"
    )
    text = assert_error(contained.attempt(code), "sandbox stopped")
    assert "fresh sandbox" in text


def test_a_fifo_planted_as_the_session_log_cannot_block_the_host(contained: Host) -> None:
    code = (
        "import os, glob\n"
        "for path in glob.glob('/workspace/sessions/*.jsonl'):\n"
        "    os.remove(path)\n"
        "    os.mkfifo(path)\n"
        "sorted(os.path.basename(p) for p in glob.glob('/workspace/sessions/*'))"
    )
    assert contained.attempt(code).status == "ok"
    # The host appends each turn to that log: were it opened blocking, this cell would hang.
    assert contained.kernel.run("%%mcp --code\n'still answering'", timeout=30).results() == [
        "'still answering'"
    ]
    for fifo in (contained.workspace / "sessions").glob("*.jsonl"):
        fifo.unlink()


def test_a_forged_result_frame_is_refused_not_raised(contained: Host) -> None:
    code = (
        "import cemcp_sandbox\n"
        "agent = cemcp_sandbox._agent\n"
        "agent.channel.send({'type': 'result', 'id': agent.current.id, 'value': 'not a value'})\n"
        "import time\ntime.sleep(3)"
    )
    text = assert_error(contained.attempt(code), "malformed result")
    assert "Traceback" not in text.splitlines()[0]
    assert "fresh sandbox" in text
