"""Which backends actually run code on this host: boot a sandbox, ping the agent, remember.

``auto`` picks the strongest backend whose probe succeeded. Results are cached per host
configuration so that a kernel start does not boot a probe sandbox every time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import platform
import sys
import time

from pydantic import BaseModel

from ..config import Settings
from ..errors import SandboxBusy, SandboxError, SandboxUnavailable
from ..paths import cache_dir
from .backend import AgentSandbox
from .results import ExecutionResult

# Strongest first. There is no unsandboxed backend at all.
STRENGTH = ("microsandbox", "bubblewrap")
# A bound on one probe however a backend misbehaves; each backend bounds its own boot tighter.
PROBE_TIMEOUT_S = 240.0


class BackendReport(BaseModel):
    name: str
    works: bool
    isolation: str
    reason: str
    boot_ms: float | None = None
    lasting: bool = True  # False when the refusal passes (a lock): such a probe is not cached


def _host_key(settings: Settings) -> str:
    parts = [platform.release(), sys.version, str(os.getuid()), os.environ.get("PATH", "")]
    parts.append(settings.sandbox.model_dump_json(exclude={"timeout", "max_output_bytes"}))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


async def probe(name: str, settings: Settings) -> BackendReport:
    """Check, then boot one sandbox of this backend and run ``1 + 1`` in it.

    Never raises: whatever goes wrong with one backend is its report's reason, so that it cannot
    keep ``auto`` from choosing another.
    """
    from . import backend_class

    cls = backend_class(name)
    started = time.perf_counter()
    try:
        result = await asyncio.wait_for(_check_boot_and_run(cls, settings), PROBE_TIMEOUT_S)
    except SandboxBusy as exc:
        return BackendReport(
            name=name, works=False, isolation=cls.isolation, reason=str(exc), lasting=False
        )
    except (SandboxError, OSError) as exc:
        return BackendReport(name=name, works=False, isolation=cls.isolation, reason=str(exc))
    except asyncio.TimeoutError:
        reason = f"{name}: no answer within {PROBE_TIMEOUT_S:g} s"
        return BackendReport(name=name, works=False, isolation=cls.isolation, reason=reason)
    except Exception as exc:  # a bug or an SDK surprise: report it, never break auto
        reason = f"{name}: unexpected {type(exc).__name__}: {exc}"
        return BackendReport(name=name, works=False, isolation=cls.isolation, reason=reason)
    if result.error is not None or result.value is None or result.value.data != 2:
        reason = result.error.evalue if result.error else "the agent gave a wrong answer"
        return BackendReport(name=name, works=False, isolation=cls.isolation, reason=reason)
    boot = (time.perf_counter() - started) * 1000
    return BackendReport(
        name=name, works=True, isolation=cls.isolation, reason="boots and runs code", boot_ms=boot
    )


async def _check_boot_and_run(cls: type[AgentSandbox], settings: Settings) -> ExecutionResult:
    await cls.preflight(settings)
    sandbox = cls(settings, None)
    try:
        await sandbox.start()
        return await sandbox.execute("1 + 1", timeout=30)
    finally:
        await sandbox.close()


async def probe_all(settings: Settings, refresh: bool = False) -> list[BackendReport]:
    path = cache_dir() / "probe.json"
    key = _host_key(settings)
    if not refresh:
        try:
            cached = json.loads(path.read_text())
            if cached.get("key") == key:
                return [BackendReport.model_validate(r) for r in cached["reports"]]
        except (OSError, ValueError, KeyError):
            pass
    # Side by side: a slow refusal of one backend does not add to the others' time.
    reports = list(await asyncio.gather(*(probe(name, settings) for name in STRENGTH)))
    if not all(r.lasting for r in reports):
        return reports  # asked again next time, when the lock may be gone
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "reports": [r.model_dump() for r in reports]}))
    except OSError:
        pass
    return reports


async def choose(settings: Settings) -> str:
    """The backend to use: the configured one, or for ``auto`` the strongest that works."""
    wanted = settings.sandbox.backend
    if wanted != "auto":
        return wanted
    reports = await probe_all(settings)
    for report in reports:
        if report.works:
            return report.name
    reasons = "; ".join(f"{r.name}: {r.reason}" for r in reports)
    raise SandboxUnavailable(
        f"No sandbox backend works on this host, so cemcp will not run code ({reasons}). "
        "Run `python -m cemcp_kernel doctor` for details."
    )


def run_probe(settings: Settings, refresh: bool = False) -> list[BackendReport]:
    return asyncio.run(probe_all(settings, refresh))
