"""``python -m cemcp_kernel doctor``: what can run code here and why not, and what is configured."""

from __future__ import annotations

from pydantic import BaseModel

from .bridge.config import load_server, resolve
from .catalog import Discovery, Problem
from .config import Settings, load_settings
from .embeddings import MODEL_NAME
from .errors import McpServerError
from .paths import cache_dir
from .sandbox import cgroups, packages
from .sandbox.probe import BackendReport, run_probe
from .semantic import SemanticIndexer


class ServerCheck(BaseModel):
    """A live server of the tool tree: can its command be found and its ${VAR}s resolved?

    The doctor starts no server; the first call (or ``servers refresh``) does.
    """

    name: str
    ok: bool
    problem: str | None = None


class DoctorReport(BaseModel):
    backends: list[BackendReport]
    configured_backend: str
    chosen: str | None
    pool_size: int
    limits: dict[str, float | int]
    enforcement: str
    sandbox_packages: str
    model: str
    selection: str
    catalog_tools: int
    catalog_servers: list[str]
    catalog_problems: list[Problem]
    mcp_servers: list[ServerCheck] = []

    @property
    def can_run_code(self) -> bool:
        return self.chosen is not None

    def text(self) -> str:
        lines = ["Sandbox backends:"]
        for b in self.backends:
            mark = "yes" if b.works else "no "
            boot = f" ({b.boot_ms:.0f} ms to boot and run code)" if b.boot_ms else ""
            lines.append(f"  {mark} {b.name:13} {b.isolation}{boot}")
            if not b.works:
                lines.append(f"      why not: {b.reason}")
        chosen = self.chosen or "none: cemcp cannot run code on this host"
        lines.append(f"Chosen ({self.configured_backend}): {chosen}")
        limits = ", ".join(f"{k} {v:,}" for k, v in self.limits.items())
        lines.append(f"Pool: {self.pool_size} warm sandboxes; limits per execution: {limits}")
        lines.append(f"Limits enforced by: {self.enforcement}")
        lines.append(f"Sandbox packages: {self.sandbox_packages}")
        lines.append(f"Model: {self.model}")
        lines.append(f"Selection: {self.selection}")
        lines.append(
            f"Catalog: {self.catalog_tools} tools in {len(self.catalog_servers)} servers"
            + (f" ({', '.join(self.catalog_servers)})" if self.catalog_servers else "")
        )
        for problem in self.catalog_problems:
            lines.append(f"  broken tool file {problem.path}: {problem.message}")
        if self.mcp_servers:
            lines.append("Live MCP servers (server.json):")
            for server in self.mcp_servers:
                mark = "yes" if server.ok else "no "
                lines.append(
                    f"  {mark} {server.name}" + (f": {server.problem}" if server.problem else "")
                )
        return "\n".join(lines)


def _packages(settings: Settings) -> str:
    wanted = ", ".join(settings.sandbox.packages) or "none configured"
    if packages.missing(settings):
        return f"{wanted}: NOT installed, run `python -m cemcp_kernel sandbox-packages`"
    return wanted


def _guest_boots(settings: Settings, report: BackendReport, refresh: bool) -> BackendReport:
    """When microsandbox was refused before any boot (no image pulled), boot its guest kernel
    once on an empty root filesystem, so the report also says whether a VM can run here."""
    local = settings.sandbox.rootfs is None and settings.sandbox.microsandbox_api_key is None
    if (
        report.name != "microsandbox"
        or report.works
        or not local
        or "not in its local" not in report.reason
    ):
        return report
    from .sandbox.microsandbox import bare_rootfs

    rootfs = bare_rootfs(cache_dir() / "microsandbox-boot-check")
    check = settings.updated({"sandbox.rootfs": str(rootfs), "sandbox.backend": "microsandbox"})
    booted = next(r for r in run_probe(check, refresh=refresh) if r.name == "microsandbox")
    if "did not boot" in booted.reason:
        finding = f" A test boot on an empty root filesystem fails too: {booted.reason}"
    else:
        finding = " A test boot on an empty root filesystem shows that the guest kernel runs here."
    return report.model_copy(update={"reason": report.reason + finding})


def diagnose(settings: Settings | None = None, refresh: bool = False) -> DoctorReport:
    settings = settings or load_settings()
    reports = [_guest_boots(settings, r, refresh) for r in run_probe(settings, refresh=refresh)]
    wanted = settings.sandbox.backend
    working = [r.name for r in reports if r.works]
    chosen = (
        (working[0] if working else None)
        if wanted == "auto"
        else (wanted if wanted in working else None)
    )
    catalog = Discovery(cache_dir() / "catalog.json").discover(
        settings.servers_dir, settings.skills_dir
    )
    s = settings.sandbox
    return DoctorReport(
        selection=selection_summary(settings),
        backends=reports,
        configured_backend=wanted,
        chosen=chosen,
        pool_size=s.pool_size,
        limits={
            "timeout_s": s.timeout,
            "memory_mb": s.memory_mb,
            "max_processes": s.max_processes,
            "max_output_bytes": s.max_output_bytes,
        },
        enforcement=cgroups.describe(),
        sandbox_packages=_packages(settings),
        model=settings.model.endpoint,
        catalog_tools=len(catalog.tools),
        catalog_servers=catalog.servers,
        catalog_problems=catalog.problems,
        mcp_servers=check_servers(settings),
    )


def check_servers(settings: Settings) -> list[ServerCheck]:
    root = settings.servers_dir
    checks = []
    folders = sorted(p.parent for p in root.glob("*/server.json")) if root.is_dir() else []
    for folder in folders:
        try:
            resolve(load_server(folder), folder.name, settings.project_dir)
            checks.append(ServerCheck(name=folder.name, ok=True))
        except McpServerError as exc:
            checks.append(ServerCheck(name=folder.name, ok=False, problem=str(exc)))
    return checks


def selection_summary(settings: Settings) -> str:
    """Which selection a request will get, found without loading the model (it takes seconds)."""
    indexer = SemanticIndexer(settings.selection.semantic, None)
    if indexer.state in ("off", "unavailable"):
        return f"keyword (BM25): {indexer.reason}"
    return f"hybrid (BM25 + {MODEL_NAME}); the model loads in the background on first use"
