"""Static checks of generated code before review, by ``ast``.

The sandbox is the security boundary; guardrails are a second look that tells the reviewer what
the code tries to do. Blocked constructs stop the code; warnings are shown in the review and
block only in strict mode. Code is never edited.
"""

from __future__ import annotations

import ast
from typing import Literal

from pydantic import BaseModel

Level = Literal["block", "warn"]

_BLOCKED_MODULES = {
    "subprocess": "spawns processes",
    "pty": "spawns processes",
    "multiprocessing": "spawns processes",
    "socket": "opens raw sockets",
    "ssl": "opens network connections",
    "ctypes": "calls native code directly",
    "cffi": "calls native code directly",
}
_WARNED_MODULES = {
    "importlib": "imports modules by name",
    "shutil": "can delete or move whole folders",
    "urllib": "tries to use the network, which the sandbox does not have",
    "http": "tries to use the network, which the sandbox does not have",
    "threading": "starts threads that may outlive the cell",
    "signal": "changes signal handling",
}
_BLOCKED_CALLS = {
    "os.system": "runs a shell command",
    "os.popen": "runs a shell command",
    "os.fork": "spawns processes",
    "os.forkpty": "spawns processes",
    "os.kill": "signals processes",
    "os.killpg": "signals processes",
    "asyncio.create_subprocess_exec": "spawns processes",
    "asyncio.create_subprocess_shell": "runs a shell command",
    "asyncio.open_connection": "opens network connections",
}
_BLOCKED_PREFIXES = {
    "os.exec": "replaces the process",
    "os.spawn": "spawns processes",
    "os.posix_spawn": "spawns processes",
}
_DYNAMIC = {"eval", "exec", "compile", "__import__"}
_WRITE_METHODS = {
    "write_text",
    "write_bytes",
    "unlink",
    "mkdir",
    "rmdir",
    "touch",
    "rename",
    "replace",
    "symlink_to",
}
_OS_WRITES = {
    "os.remove",
    "os.unlink",
    "os.rmdir",
    "os.mkdir",
    "os.makedirs",
    "os.rename",
    "os.replace",
    "os.symlink",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "shutil.rmtree",
    "shutil.copy",
    "shutil.copyfile",
    "shutil.move",
}


class Finding(BaseModel):
    level: Level
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def check(code: str) -> list[Finding]:
    """Findings for the code, in line order. Code that does not parse gives no findings here."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    visitor = _Visitor()
    visitor.visit(tree)
    return sorted(visitor.findings, key=lambda f: (f.line, f.level))


def blocking(findings: list[Finding], strict: bool) -> list[Finding]:
    return [f for f in findings if f.level == "block" or strict]


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> dotted origin

    def add(self, level: Level, node: ast.AST, message: str) -> None:
        self.findings.append(Finding(level=level, line=getattr(node, "lineno", 0), message=message))

    def _module(self, node: ast.AST, module: str) -> None:
        root = module.split(".")[0]
        if root in _BLOCKED_MODULES:
            self.add("block", node, f"imports {module}, which {_BLOCKED_MODULES[root]}")
        elif root in _WARNED_MODULES:
            self.add("warn", node, f"imports {module}, which {_WARNED_MODULES[root]}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)
            self.aliases[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._module(node, module)
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
            dotted = f"{module}.{alias.name}"
            if dotted in _BLOCKED_CALLS or any(dotted.startswith(p) for p in _BLOCKED_PREFIXES):
                self.add("block", node, f"imports {dotted}")

    def _dotted(self, node: ast.expr) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def visit_Call(self, node: ast.Call) -> None:
        name = self._dotted(node.func) or ""
        if name in _BLOCKED_CALLS:
            self.add("block", node, f"calls {name}, which {_BLOCKED_CALLS[name]}")
        for prefix, why in _BLOCKED_PREFIXES.items():
            if name.startswith(prefix):
                self.add("block", node, f"calls {name}, which {why}")
        if name in _DYNAMIC:
            literal = node.args and isinstance(node.args[0], ast.Constant)
            what = "a string" if literal else "code built at run time"
            self.add("block", node, f"calls {name}() on {what}; write the code out instead")
        if name == "getattr" and len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
            self.add("warn", node, "looks up an attribute by a computed name")
        self._check_write(node, name)
        self.generic_visit(node)

    def _check_write(self, node: ast.Call, name: str) -> None:
        if name == "open" and node.args:
            mode = node.args[1] if len(node.args) > 1 else _keyword(node, "mode")
            writes = isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+")
            path = _literal_path(node.args[0])
            if writes and path is not None and not _inside_workspace(path):
                self.add("block", node, f"writes to {path}, outside /workspace")
        elif name in _OS_WRITES and node.args:
            path = _literal_path(node.args[0])
            if path is not None and not _inside_workspace(path):
                self.add("block", node, f"{name} changes {path}, outside /workspace")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _WRITE_METHODS:
            target = node.func.value
            if isinstance(target, ast.Call) and target.args:
                path = _literal_path(target.args[0])
                if path is not None and not _inside_workspace(path):
                    self.add(
                        "block", node, f".{node.func.attr}() changes {path}, outside /workspace"
                    )


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def _literal_path(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def _inside_workspace(path: str) -> bool:
    """Relative paths resolve in /workspace (the working directory); absolute ones must be in it."""
    if not path.startswith("/"):
        return ".." not in path.split("/")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return bool(parts) and parts[0] == "workspace" and ".." not in parts
