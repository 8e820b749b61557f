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
        # the same things reached indirectly
        "__import__('os').system('id')",
        "import importlib\nimportlib.import_module('subprocess').run(['id'])",
        "import os\ngetattr(os, 'system')('id')",
        "import os as o\no.popen('id')",
        "import os\nrun = os.system\nrun('id')",
        "from os import *\nsystem('id')",
        "import builtins\nbuiltins.eval('1 + 1')",
        "import pathlib\npathlib.Path('/etc').joinpath('passwd').write_text('x')",
        "from pathlib import Path\n(Path('/etc') / 'cron.d').mkdir()",
        "from pathlib import Path\np = Path('/etc/x').resolve()\np.write_text('x')",
        "from pathlib import Path\nPath('/etc/x').open('w')",
        "import shutil\nshutil.copy('data.csv', '/etc/data.csv')",
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
        "from pathlib import Path\n(Path('/workspace') / 'out.txt').write_text('ok')",
        "from pathlib import Path\nPath('/etc/hosts').read_text()",
        "__import__('json').dumps([1])",
        "import os\nos.path.join('a', 'b')",
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


def test_findings_name_what_was_reached_and_where() -> None:
    findings = check("import os\nrun = getattr(os, 'system')\nrun('id')")
    assert [(f.line, f.message) for f in findings] == [
        (2, "uses os.system, which runs a shell command"),
        (3, "uses os.system, which runs a shell command"),
    ]
    shell_copy = check("import shutil\nshutil.copy('/etc/hosts', 'hosts')")
    assert [f.level for f in shell_copy] == ["warn"]  # reading from outside is not a write


def test_importing_by_a_computed_name_is_a_warning() -> None:
    findings = check("import importlib\nmodule = importlib.import_module(name)")
    assert {f.level for f in findings} == {"warn"}
    assert any("computed name" in f.message for f in findings)
