"""Static checks of generated code before review, by ``ast``.

The sandbox is the security boundary; guardrails are a second look that tells the reviewer what
the code tries to do. Blocked constructs stop the code; warnings are shown in the review and
block only in strict mode. Code is never edited.
"""

from __future__ import annotations

import ast
import posixpath
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
_DYNAMIC = {"eval", "exec", "compile"}
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
# Calls that change the file system, and which of their positional arguments they change.
_OS_WRITES: dict[str, tuple[int, ...]] = {
    "os.remove": (0,),
    "os.unlink": (0,),
    "os.rmdir": (0,),
    "os.removedirs": (0,),
    "os.mkdir": (0,),
    "os.makedirs": (0,),
    "os.rename": (0, 1),
    "os.renames": (0, 1),
    "os.replace": (0, 1),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "shutil.rmtree": (0,),
    "shutil.copy": (1,),
    "shutil.copy2": (1,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
}
_PATH_TYPES = {"pathlib.Path", "pathlib.PosixPath", "pathlib.PurePath", "pathlib.PurePosixPath"}
_SAME_PATH_METHODS = {"resolve", "absolute", "expanduser"}
_MODULE_LOADERS = {"importlib.import_module", "importlib.__import__", "__import__"}


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
        self.paths: dict[str, str] = {}  # local name -> the literal path it holds

    def add(self, level: Level, node: ast.AST, message: str) -> None:
        finding = Finding(level=level, line=getattr(node, "lineno", 0), message=message)
        if finding not in self.findings:
            self.findings.append(finding)

    def _module(self, node: ast.AST, module: str) -> None:
        root = module.split(".")[0]
        if root in _BLOCKED_MODULES:
            self.add("block", node, f"imports {module}, which {_BLOCKED_MODULES[root]}")
        elif root in _WARNED_MODULES:
            self.add("warn", node, f"imports {module}, which {_WARNED_MODULES[root]}")

    def _callable(self, node: ast.AST, dotted: str) -> None:
        """Any use of a blocked function, called or not (``run = os.system`` counts)."""
        why = _BLOCKED_CALLS.get(dotted) or next(
            (w for p, w in _BLOCKED_PREFIXES.items() if dotted.startswith(p)), None
        )
        if why is not None:
            self.add("block", node, f"uses {dotted}, which {why}")

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
            if alias.name == "*":
                hidden = [
                    c for c in [*_BLOCKED_CALLS, *_BLOCKED_PREFIXES] if c.startswith(f"{module}.")
                ]
                if hidden:
                    self.add(
                        "block", node, f"imports everything from {module}, including {hidden[0]}"
                    )
                continue
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
            self._callable(node, f"{module}.{alias.name}")

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return
        name = node.targets[0].id
        dotted = self._dotted(node.value)
        if dotted is not None:
            self.aliases[name] = dotted
        path = self._path(node.value)
        if path is not None:
            self.paths[name] = path

    def _dotted(self, node: ast.expr) -> str | None:
        """``os.path.join`` for that expression, through import aliases and literal getattr."""
        parts = []
        while True:
            if isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                parts.append(node.args[1].value)
                node = node.args[0]
            elif isinstance(node, ast.Call) and self._loaded_module(node) is not None:
                parts.append(str(self._loaded_module(node)))
                break
            elif isinstance(node, ast.Name):
                parts.append(self.aliases.get(node.id, node.id))
                break
            else:
                return None
        dotted = ".".join(reversed(parts))
        for prefix in ("builtins.", "__builtins__."):
            dotted = dotted.removeprefix(prefix)
        return dotted

    def _loaded_module(self, node: ast.Call) -> str | None:
        """The module named by ``__import__('os')`` or ``importlib.import_module('os')``."""
        if not isinstance(node.func, (ast.Name, ast.Attribute)) or not node.args:
            return None
        name = node.func.id if isinstance(node.func, ast.Name) else self._dotted(node.func)
        first = node.args[0]
        if name in _MODULE_LOADERS and isinstance(first, ast.Constant):
            return str(first.value)
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._dotted(node)
        if dotted is not None:
            self._callable(node, dotted)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases:
            self._callable(node, self.aliases[node.id])

    def visit_Call(self, node: ast.Call) -> None:
        name = self._dotted(node.func) or ""
        self._callable(node, name)
        if name == "getattr":
            self._callable(node, self._dotted(node) or "")
        loaded = self._loaded_module(node)
        if loaded is not None:
            self._module(node, loaded)
        elif name in _MODULE_LOADERS:
            self.add("warn", node, f"calls {name}() to import a module by a computed name")
        elif name in _DYNAMIC:
            literal = node.args and isinstance(node.args[0], ast.Constant)
            what = "a string" if literal else "code built at run time"
            self.add("block", node, f"calls {name}() on {what}; write the code out instead")
        if name == "getattr" and len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
            self.add("warn", node, "looks up an attribute by a computed name")
        self._check_write(node, name)
        self.generic_visit(node)

    def _path(self, node: ast.expr) -> str | None:
        """The path an expression stands for, when it is built from literals only."""
        if isinstance(node, ast.Name):
            return self.paths.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = self._path(node.left), _literal_path(node.right)
            return None if left is None or right is None else posixpath.join(left, right)
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        name = self._dotted(func) or ""
        if name in _PATH_TYPES and node.args:
            parts = [_literal_path(a) for a in node.args]
            return None if None in parts else posixpath.join(*parts)  # type: ignore[arg-type]
        if isinstance(func, ast.Attribute) and func.attr == "joinpath":
            base, parts = self._path(func.value), [_literal_path(a) for a in node.args]
            if base is None or None in parts:
                return None
            return posixpath.join(base, *parts)  # type: ignore[arg-type]
        if isinstance(func, ast.Attribute) and func.attr in _SAME_PATH_METHODS:
            return self._path(func.value)
        return None

    def _check_write(self, node: ast.Call, name: str) -> None:
        if name == "open" and node.args:
            self._open(node, self._path(node.args[0]) or _literal_path(node.args[0]), 1)
        elif name in _OS_WRITES:
            for position in _OS_WRITES[name]:
                if position < len(node.args):
                    path = self._path(node.args[position]) or _literal_path(node.args[position])
                    if path is not None and not _inside_workspace(path):
                        self.add("block", node, f"{name} changes {path}, outside /workspace")
        elif isinstance(node.func, ast.Attribute):
            method, path = node.func.attr, self._path(node.func.value)
            if method == "open":
                self._open(node, path, 0)
            elif method in _WRITE_METHODS and path is not None and not _inside_workspace(path):
                self.add("block", node, f".{method}() changes {path}, outside /workspace")

    def _open(self, node: ast.Call, path: str | None, mode_position: int) -> None:
        if len(node.args) > mode_position:
            mode = node.args[mode_position]
        else:
            mode = _keyword(node, "mode")
        writes = isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+")
        if writes and path is not None and not _inside_workspace(path):
            self.add("block", node, f"writes to {path}, outside /workspace")


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
