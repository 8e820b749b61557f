"""Per-sandbox cgroups: a process-count and memory ceiling for everything inside one sandbox.

The agent's rlimits already cap its own address space, and RLIMIT_NPROC caps processes for an
unprivileged host user (it is counted per user namespace). For a host running as root,
RLIMIT_NPROC counts every root process of the machine, so a fork bomb needs a cgroup: where the
host lets cemcp create one (cgroup v1 ``pids``/``memory`` hierarchies, or the cgroup v2 root),
each sandbox gets its own, and ``doctor`` says which enforcement is in place.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Support:
    """Where per-sandbox cgroups are created: one parent folder per controller."""

    version: int
    pids: Path
    memory: Path | None


@cache
def detect() -> Support | None:
    """The cgroup layout this process may use, or None (then rlimits are all there is)."""
    return _detect_v2() or _detect_v1()


def _own_path(controller: str) -> str | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return None


def _writable_child(parent: Path) -> Path | None:
    folder = parent / "cemcp"
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


def _detect_v1() -> Support | None:
    paths: dict[str, Path | None] = {}
    for controller in ("pids", "memory"):
        own = _own_path(controller)
        hierarchy = ROOT / controller
        if own is None or not (hierarchy / "cgroup.procs").exists():
            paths[controller] = None
            continue
        paths[controller] = _writable_child(hierarchy / own.lstrip("/"))
    pids = paths["pids"]
    return Support(version=1, pids=pids, memory=paths["memory"]) if pids else None


def _detect_v2() -> Support | None:
    # Only the root of a unified hierarchy lets a process create sibling groups with controllers
    # enabled while it stays where it is (the "no internal processes" rule spares the root).
    controllers = ROOT / "cgroup.controllers"
    if not controllers.exists() or not os.access(ROOT / "cgroup.subtree_control", os.W_OK):
        return None
    available = controllers.read_text().split()
    if "pids" not in available:
        return None
    folder = _writable_child(ROOT)
    if folder is None:
        return None
    wanted = [c for c in ("pids", "memory") if c in available]
    try:
        (ROOT / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
        (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
    except OSError:
        return None
    return Support(version=2, pids=folder, memory=folder if "memory" in wanted else None)


def describe() -> str:
    support = detect()
    if support is None:
        who = "as an unprivileged user" if os.getuid() != 0 else "NOT enforced for root"
        return f"rlimits only (process count per user namespace {who})"
    memory = " and memory" if support.memory else ""
    return f"cgroup v{support.version} (process count{memory} per sandbox)"


class Cgroup:
    """The cgroup(s) of one sandbox; created empty, filled by :meth:`add`, removed at the end."""

    def __init__(self, support: Support, name: str, max_pids: int, memory_bytes: int) -> None:
        self.support = support
        self.folders: list[Path] = []
        self.memory: Path | None = None
        pids = support.pids / name
        pids.mkdir()
        self.folders.append(pids)
        (pids / "pids.max").write_text(str(max_pids))
        if support.memory is not None:
            memory = support.memory / name
            if memory != pids:
                memory.mkdir()
                self.folders.append(memory)
            limit = "memory.max" if support.version == 2 else "memory.limit_in_bytes"
            (memory / limit).write_text(str(memory_bytes))
            if support.version == 2:
                with contextlib.suppress(OSError):
                    (memory / "memory.swap.max").write_text("0")
            self.memory = memory

    def add(self, pid: int) -> None:
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """How many processes the kernel killed for exceeding the memory limit."""
        if self.memory is None:
            return 0
        name = "memory.events" if self.support.version == 2 else "memory.oom_control"
        try:
            for line in (self.memory / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Kill what is left and remove the folders (a cgroup can only go once empty)."""
        for folder in self.folders:
            for _ in range(50):
                try:
                    pids = (folder / "cgroup.procs").read_text().split()
                except OSError:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), 9)
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.01)
