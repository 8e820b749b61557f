"""The bubblewrap sandbox, for real: what is visible inside, what persists, what stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from cemcp_kernel.config import Settings
from cemcp_kernel.engine import Engine

from .conftest import ROOT, SECRET_KEY, loopback_listener


def test_workspace_files_reach_the_host_and_survive_a_new_session(
    engine: Engine, workspace: Path, settings: Settings
) -> None:
    result = engine.execute(
        "from pathlib import Path\nPath('/workspace/out.csv').write_text('a,b\\n1,2\\n')"
    )
    assert result.ok, result.error
    assert (workspace / "out.csv").read_text() == "a,b\n1,2\n"
    engine.reset()
    with Engine(settings) as other:
        assert other.execute("open('/workspace/out.csv').read()").value.data == "a,b\n1,2\n"


def test_host_files_outside_the_mounts_cannot_be_read(engine: Engine, tmp_path: Path) -> None:
    private = tmp_path / "private.txt"
    private.write_text("host secret")
    for path in (private, ROOT / "pyproject.toml", Path.home(), Path("/etc/shadow")):
        result = engine.execute(f"open({str(path)!r}).read()")
        assert result.error is not None, path
        assert result.error.ename == "FileNotFoundError", (path, result.error)  # absent, not denied


def test_the_environment_is_empty_of_host_secrets(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    with Engine(settings) as fresh:  # sandboxes started while the host has the key
        check = (
            "import os, glob\n"
            f"key = {SECRET_KEY!r}.encode()\n"
            "[p for p in glob.glob('/proc/*/environ') if key in open(p, 'rb').read()]"
            " + [k for k, v in os.environ.items() if v.encode() == key]"
        )
        assert fresh.execute(check).value.data == []


def test_tools_are_importable_but_read_only(engine: Engine) -> None:
    result = engine.execute("from servers.calculator.add import add\nadd(2, 3)")
    assert result.value.data == 5
    result = engine.execute("open('/opt/cemcp/lib/servers/calculator/add.py', 'a').write('x')")
    assert result.error is not None and result.error.ename == "OSError"
    assert "Read-only file system" in result.error.evalue


def test_no_network_even_to_the_hosts_loopback(engine: Engine) -> None:
    with loopback_listener() as listener:
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), timeout=2)"
        result = engine.execute(code)
        assert result.error is not None and result.error.ename == "ConnectionRefusedError"
        result = engine.execute("import socket\nsocket.getaddrinfo('pypi.org', 443)")
        assert result.error is not None and result.error.ename == "gaierror"
        assert listener.accepted == []


def test_variables_persist_until_reset(engine: Engine) -> None:
    assert engine.execute("rows = [1, 2, 3]").ok
    assert engine.execute("sum(rows)").value.data == 6
    engine.reset()
    result = engine.execute("rows")
    assert result.error is not None and result.error.ename == "NameError"


def test_output_streams_while_the_code_runs(engine: Engine) -> None:
    chunks: list[tuple[str, str]] = []
    code = "import sys, time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.15)\nprint('oops', file=sys.stderr)"
    result = engine.execute(code, on_stream=lambda name, text: chunks.append((name, text)))
    assert result.stdout == "0\n1\n2\n" and result.stderr == "oops\n"
    assert len([c for c in chunks if c[0] == "stdout"]) >= 2  # delivered as it came, not at the end
    assert "".join(t for n, t in chunks if n == "stdout") == result.stdout


def test_a_timeout_stops_the_code_and_the_session_goes_on(engine: Engine, workspace: Path) -> None:
    engine.execute("open('/workspace/kept.txt', 'w').write('kept')\nx = 1")
    result = engine.execute("while True:\n    pass", timeout=1)
    assert result.error is not None and result.error.kind == "timeout"
    assert "--timeout" in result.error.evalue
    assert any("fresh sandbox" in n for n in result.notices)
    assert engine.execute("open('/workspace/kept.txt').read()").value.data == "kept"
    assert (workspace / "kept.txt").exists()


def test_user_errors_show_the_failing_line(engine: Engine) -> None:
    result = engine.execute("a = 1\nb = 0\na / b")
    assert result.error.ename == "ZeroDivisionError"
    assert result.error.lineno == 3
    assert "a / b" in result.error.traceback
    assert "agent.py" not in result.error.traceback


def test_top_level_await_works(engine: Engine) -> None:
    result = engine.execute(
        "import asyncio\nawait asyncio.sleep(0.01)\nawait asyncio.gather(*(asyncio.sleep(0, i) for i in range(3)))"
    )
    assert result.value.data == [0, 1, 2]
