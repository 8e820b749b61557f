"""Broken and hostile tool files: reported by discovery and by ``doctor``, skipped, never run."""

from __future__ import annotations

import os
from pathlib import Path

from cemcp_kernel.catalog import Discovery
from cemcp_kernel.config import load_settings
from cemcp_kernel.doctor import diagnose


def _tree(tmp_path: Path) -> Path:
    servers = tmp_path / "servers"
    good = servers / "good"
    good.mkdir(parents=True)
    (good / "hello.py").write_text("def hello(name: str) -> str:\n    'Greet.'\n    return name\n")
    bad = servers / "bad"
    bad.mkdir()
    (bad / "syntax.py").write_text("def broken(:\n")
    (bad / "nul.py").write_bytes(b"def f():\n    return 1\x00\n")
    (bad / "latin1.py").write_bytes(b"# \xe9\xff\ndef f() -> int:\n    return 1\n")
    (bad / "all_int.py").write_text("__all__ = 5\ndef f() -> int:\n    return 1\n")
    (bad / "all_nested.py").write_text("__all__ = [[1]]\ndef f() -> int:\n    return 1\n")
    (bad / "deep.py").write_text("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    (bad / "huge.py").write_text("# padding\n" * 120_000)
    os.mkfifo(bad / "fifo.py")  # reading it would block discovery forever
    outside = tmp_path / "outside.py"
    outside.write_text("def leaked() -> str:\n    'A host file the sandbox cannot see.'\n")
    (bad / "link.py").symlink_to(outside)
    (bad / "server.json").write_text('{"command": "cemcp-no-such-server"}')
    return servers


def test_hostile_files_are_reported_and_skipped(tmp_path: Path) -> None:
    servers = _tree(tmp_path)
    catalog = Discovery().discover(servers, None)
    assert [t.qualname for t in catalog.tools] == ["good.hello"]
    problems = {Path(p.path).name: p.message for p in catalog.problems}
    assert set(problems) == {
        "syntax.py", "nul.py", "latin1.py", "all_int.py", "all_nested.py", "deep.py",
        "huge.py", "fifo.py", "link.py",
    }  # fmt: skip
    assert "line 1" in problems["syntax.py"]
    assert "not a regular file" in problems["fifo.py"]
    assert "outside the tool tree" in problems["link.py"]
    assert "limit for a tool file" in problems["huge.py"]


def test_doctor_lists_broken_files_and_unusable_servers(tmp_path: Path, workspace: Path) -> None:
    servers = _tree(tmp_path)
    settings = load_settings(tmp_path, servers_dir=str(servers), workspace_dir=str(workspace))
    report = diagnose(settings)
    text = report.text()
    assert "broken tool file" in text and "fifo.py: not a regular file" in text
    assert "Catalog: 1 tools in 1 servers (good)" in text
    (check,) = report.mcp_servers
    assert check.name == "bad" and not check.ok
    assert "'cemcp-no-such-server' was not found" in (check.problem or "")
