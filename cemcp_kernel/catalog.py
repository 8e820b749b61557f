"""Discovery of the tool tree: ``servers/<server>/<tool>.py`` and ``skills/<name>/``.

Files are read and parsed with ``ast``, never imported: tool code runs only in the sandbox.
A file that does not parse is reported as a problem and skipped; it never breaks the catalog.
Parsed files are cached by content hash, in memory and on disk, so a warm discovery only
stats files and hashes the ones that changed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

CACHE_VERSION = 1
MAX_FILE_BYTES = 1_000_000  # a tool file larger than this is refused, not parsed


class Param(BaseModel):
    name: str
    annotation: str | None = None
    default: str | None = None  # source text of the default; None when required

    @property
    def required(self) -> bool:
        return self.default is None


class ToolSpec(BaseModel):
    """A callable the generated code may import: a tool of a server, or a skill."""

    kind: Literal["tool", "skill"] = "tool"
    server: str  # the server folder, or the skill's name
    name: str
    module: str  # import path inside the sandbox, e.g. servers.calculator.calculate
    signature: str
    description: str = ""
    params: list[Param] = []
    path: str
    is_async: bool = False

    @property
    def qualname(self) -> str:
        return f"{self.server}.{self.name}"

    @property
    def import_line(self) -> str:
        return f"from {self.module} import {self.name}"

    @property
    def summary(self) -> str:
        """The first paragraph of the docstring."""
        return self.description.strip().split("\n\n")[0].replace("\n", " ")

    def example(self) -> str:
        """An import and a call with a placeholder for every required parameter."""
        args = ", ".join(
            f"{p.name}={_placeholder(p.annotation)}" for p in self.params if p.required
        )
        call = f"{'await ' if self.is_async else ''}{self.name}({args})"
        return f"{self.import_line}\n\n{call}\n"


_PLACEHOLDERS = {
    "str": "'...'",
    "int": "0",
    "float": "0.0",
    "bool": "False",
    "list": "[]",
    "dict": "{}",
}


def _placeholder(annotation: str | None) -> str:
    """A value of the annotated type for an example call (the first choice of a Literal)."""
    if annotation is None:
        return "..."
    literal = re.match(r"Literal\[\s*('[^']*'|\"[^\"]*\"|[^,\]]+)", annotation)
    if literal:
        return literal.group(1)
    base = re.split(r"[\[| ]", annotation.strip())[0]
    return _PLACEHOLDERS.get(base.lower(), "...")


class Problem(BaseModel):
    """A tool file that could not be used, and why."""

    path: str
    message: str


@dataclass
class Catalog:
    tools: list[ToolSpec] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    key: str = ""  # set by Discovery from the files' content hashes

    def get(self, qualname: str) -> ToolSpec | None:
        for tool in self.tools:
            if tool.qualname == qualname or tool.module + "." + tool.name == qualname:
                return tool
        return None

    @property
    def servers(self) -> list[str]:
        return sorted({t.server for t in self.tools if t.kind == "tool"})

    def fingerprint(self) -> str:
        """Changes whenever any tool changes: keys caches built from the catalog."""
        if self.key:
            return self.key
        digest = hashlib.sha256()
        for tool in self.tools:
            digest.update(tool.model_dump_json().encode())
        return digest.hexdigest()[:16]


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_tool_file(source: str, path: Path, module: str, server: str, kind: str) -> list[ToolSpec]:
    """Public top-level functions of one file (those in ``__all__`` when it is defined)."""
    tree = ast.parse(source, filename=str(path))
    exported: set[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            try:
                exported = set(ast.literal_eval(node.value))
            except ValueError:
                exported = None
    tools = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name.startswith("_") or (exported is not None and node.name not in exported):
            continue
        tools.append(
            ToolSpec(
                kind=kind,  # type: ignore[arg-type]
                server=server,
                name=node.name,
                module=module,
                signature=_signature(node),
                description=ast.get_docstring(node) or "",
                params=_params(node.args),
                path=str(path),
                is_async=isinstance(node, ast.AsyncFunctionDef),
            )
        )
    return tools


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    prefix = "async def " if isinstance(node, ast.AsyncFunctionDef) else "def "
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{prefix}{node.name}({ast.unparse(node.args)}){returns}"


def _params(args: ast.arguments) -> list[Param]:
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    pairs = [
        *zip(positional, defaults, strict=True),
        *zip(args.kwonlyargs, args.kw_defaults, strict=True),
    ]
    return [
        Param(
            name=arg.arg,
            annotation=ast.unparse(arg.annotation) if arg.annotation is not None else None,
            default=ast.unparse(default) if default is not None else None,
        )
        for arg, default in pairs
    ]


@dataclass
class _Entry:
    key: tuple[int, int]
    digest: str
    tools: list[ToolSpec]
    problem: Problem | None


class Discovery:
    """Finds tools and skills; remembers parsed files by content hash between calls.

    A warm call stats each file and, when no file changed, returns the previous catalog: at ten
    thousand tools that is a directory scan, not a rebuild.
    """

    def __init__(self, cache_file: Path | None = None) -> None:
        self._cache_file = cache_file
        self._by_path: dict[str, _Entry] = {}
        self._by_digest: dict[str, list[dict[str, object]]] | None = None  # read on first use
        self._last: tuple[str, Catalog] | None = None

    def discover(self, servers_dir: Path, skills_dir: Path | None = None) -> Catalog:
        if self._by_digest is None:
            self._by_digest = self._load()
        entries: list[_Entry] = []
        fingerprint = hashlib.sha256()
        changed = False
        for path, module, owner, kind, root, linked in _tool_files(servers_dir, skills_dir):
            entry, was_parsed = self._entry(path, module, owner, kind, root, linked)
            changed |= was_parsed
            entries.append(entry)
            fingerprint.update(f"{path}\0{entry.digest}\0{entry.problem}\n".encode())
        if changed:
            self._save()
        key = fingerprint.hexdigest()[:16]
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        catalog = Catalog(key=key)
        for entry in entries:
            catalog.tools += entry.tools
            if entry.problem is not None:
                catalog.problems.append(entry.problem)
        catalog.tools.sort(key=lambda t: (t.kind != "tool", t.server, t.name))
        self._last = (key, catalog)
        return catalog

    def _entry(
        self, path: str, module: str, owner: str, kind: str, root: str, linked: bool
    ) -> tuple[_Entry, bool]:
        try:
            info = os.stat(path)
        except OSError as exc:
            return _Entry((0, 0), "", [], Problem(path=path, message=str(exc))), False
        key = (info.st_mtime_ns, info.st_size)
        refused = _refusal(path, info, root, linked)
        if refused is not None:
            return _Entry(key, "", [], Problem(path=path, message=refused)), False
        cached = self._by_path.get(path)
        if cached is not None and cached.key == key:
            return cached, False
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            return _Entry(key, "", [], Problem(path=path, message=str(exc))), False
        digest = hashlib.sha256(raw + module.encode()).hexdigest()
        parsed = False
        assert self._by_digest is not None
        if digest in self._by_digest:
            tools = [ToolSpec.model_validate(t) for t in self._by_digest[digest]]
            tools = [t.model_copy(update={"path": path}) for t in tools]
            entry = _Entry(key, digest, tools, None)
        else:
            parsed = True
            try:
                tools = parse_tool_file(raw.decode("utf-8"), Path(path), module, owner, kind)
                entry = _Entry(key, digest, tools, None)
                self._by_digest[digest] = [t.model_dump() for t in tools]
            except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError) as exc:
                # Broken or hostile files are reported and skipped; discovery itself never fails.
                entry = _Entry(key, digest, [], Problem(path=path, message=_describe(exc)))
        self._by_path[path] = entry
        return entry, parsed

    def _load(self) -> dict[str, list[dict[str, object]]]:
        if self._cache_file is None:
            return {}
        try:
            data = json.loads(self._cache_file.read_text())
        except (OSError, ValueError):
            return {}
        if isinstance(data, dict) and data.get("version") == CACHE_VERSION:
            return dict(data.get("files", {}))
        return {}

    def _save(self) -> None:
        if self._cache_file is None:
            return
        try:
            self._cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._cache_file.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"version": CACHE_VERSION, "files": self._by_digest}))
            tmp.replace(self._cache_file)
        except OSError:
            pass  # a cache that cannot be written only costs time


def _describe(exc: Exception) -> str:
    if isinstance(exc, SyntaxError):
        return f"syntax error on line {exc.lineno}: {exc.msg}"
    if isinstance(exc, RecursionError | MemoryError):
        return "nested too deeply to read; skipped"
    return f"{type(exc).__name__}: {exc}"


def _refusal(path: str, info: os.stat_result, root: str, linked: bool) -> str | None:
    """Why a candidate file is not read at all: not a regular file (a FIFO would block the
    reader), a link out of the tool tree (the host would read a file the sandbox never sees),
    or too large. Only links are resolved: a warm discovery of 10,000 files stays a scan."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file; skipped"
    if linked:
        real = os.path.realpath(path)
        if os.path.commonpath([real, os.path.realpath(root)]) != os.path.realpath(root):
            return "a link to a file outside the tool tree; skipped"
    if info.st_size > MAX_FILE_BYTES:
        return f"{info.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit for a tool file"
    return None


def _tool_files(
    servers_dir: Path, skills_dir: Path | None
) -> Iterable[tuple[str, str, str, str, str, bool]]:
    """(file, import path, server or skill name, kind, root, reached through a link), sorted."""
    roots = [(servers_dir, "servers", "tool")]
    if skills_dir is not None:
        roots.append((skills_dir, "skills", "skill"))
    for root, package, kind in roots:
        for folder, folder_path, folder_linked in _listing(str(root), directories=True):
            if not _IDENT.match(folder) or folder.startswith("_"):
                continue
            for name, path, linked in _listing(folder_path, directories=False):
                stem = name[:-3]
                if not name.endswith(".py"):
                    continue
                if kind == "tool" and (stem.startswith("_") or not _IDENT.match(stem)):
                    continue
                if kind == "skill" and stem != "__init__" and stem.startswith("_"):
                    continue
                module = (
                    f"{package}.{folder}" if stem == "__init__" else f"{package}.{folder}.{stem}"
                )
                yield path, module, folder, kind, str(root), folder_linked or linked


def _listing(folder: str, directories: bool) -> list[tuple[str, str, bool]]:
    """Sorted (name, path, is a link) of a folder's sub-folders, or of everything else in it
    (a FIFO or a device named like a tool is reported, not skipped silently)."""
    try:
        with os.scandir(folder) as entries:
            found = [(e.name, e.path, e.is_symlink()) for e in entries if e.is_dir() == directories]
    except OSError:
        return []
    return sorted(found)
