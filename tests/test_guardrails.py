from __future__ import annotations

import pytest

from cemcp_kernel.guardrails import blocking, check


@pytest.mark.parametrize(
    "code",
    [
        "import subprocess\nsubprocess.run(['ls'])",
        "import os\nos.system('id')",
        "from os import system as s\ns('id')",
        "import socket",
        "import ctypes",
        "eval('1+1')",
        "exec(source)",
        "open('/etc/passwd', 'w').write('x')",
        "from pathlib import Path\nPath('/tmp/../etc/x').write_text('x')",
        "import os\nos.remove('/opt/cemcp/lib/servers/x.py')",
        "open('/workspace/../etc/x', 'a')",
    ],
)
def test_blocked(code: str) -> None:
    assert [f for f in check(code) if f.level == "block"], code


@pytest.mark.parametrize(
    "code",
    [
        "open('/workspace/out.txt', 'w').write('ok')",
        "open('out.txt', 'w')",
        "from servers.calculator.add import add\nadd(1, 2)",
        "open('/etc/hostname').read()",
        "import json, math\nmath.sqrt(4)",
    ],
)
def test_allowed(code: str) -> None:
    assert check(code) == []


def test_warnings_block_only_in_strict_mode() -> None:
    findings = check("import shutil\nshutil.copyfileobj")
    assert [f.level for f in findings] == ["warn"]
    assert blocking(findings, strict=False) == []
    assert blocking(findings, strict=True) == findings
    assert findings[0].line == 1
