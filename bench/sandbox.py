"""Sandbox latency: warm round trips, cold starts, pool warm-up, pooled vs fresh, concurrency.

    python bench/sandbox.py [--rounds N]

Prints a table, then one JSON object of the figures as the last line. Ratios are measured side
by side in one run (pooled and fresh executions interleaved), because machines here are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from jupyter_client.manager import KernelManager

from cemcp_kernel.config import Settings, load_settings
from cemcp_kernel.engine import Engine
from cemcp_kernel.sandbox import SandboxFactory


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def warm_round_trips(engine: Engine, rounds: int) -> list[float]:
    """A trivial statement through the public API of a warm session, as a cell would run it."""
    engine.execute("0")
    times = []
    for i in range(rounds):
        started = time.perf_counter()
        result = engine.execute(str(i))
        times.append((time.perf_counter() - started) * 1000)
        assert result.value is not None and result.value.data == i, result
    return times


async def _fresh_execution(factory: SandboxFactory) -> float:
    started = time.perf_counter()
    sandbox = await factory()
    await sandbox.start()
    result = await sandbox.execute("1 + 1")
    elapsed = (time.perf_counter() - started) * 1000
    await sandbox.close()
    assert result.value is not None and result.value.data == 2, result
    return elapsed


def pooled_vs_fresh(
    engine: Engine, settings: Settings, rounds: int
) -> tuple[list[float], list[float]]:
    """Interleaved: one pooled execution, then one in a sandbox created for it."""
    factory = SandboxFactory(settings)
    pooled, fresh = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        engine.execute("1 + 1")
        pooled.append((time.perf_counter() - started) * 1000)
        fresh.append(engine._call(_fresh_execution(factory)))
    return pooled, fresh


def concurrent_sessions(engine: Engine, sessions: int, cells: int) -> tuple[bool, float]:
    """Each session keeps a running total across its cells; every answer must be exact."""
    failures: list[str] = []

    def run(index: int) -> None:
        session = f"bench-{index}"
        engine.execute("total = 0", session=session)
        for cell in range(1, cells + 1):
            result = engine.execute(f"total += {index * 1000 + cell}\ntotal", session=session)
            expected = sum(index * 1000 + c for c in range(1, cell + 1))
            if result.value is None or result.value.data != expected:
                failures.append(f"session {index} cell {cell}: {result.summary()}")

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = (time.perf_counter() - started) * 1000
    for failure in failures[:5]:
        print("FAILED", failure, file=sys.stderr)
    return not failures, elapsed


def kernel_pool_ready(workspace: Path, size: int) -> tuple[float, float]:
    """(ms from launching the cemcp kernel to its first reply, ms to ``size`` warm sandboxes)."""
    env = {"CEMCP_WORKSPACE_DIR": str(workspace), "CEMCP_SANDBOX__POOL_SIZE": str(size)}
    manager = KernelManager(kernel_name="cemcp")
    started = time.perf_counter()
    manager.start_kernel(env={**os.environ, **env})
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        replied = (time.perf_counter() - started) * 1000
        probe = "import magics\nmagics._magics.engine.pool_status().warm"
        warm: list[str] = []

        def keep(message: dict) -> None:
            if message["msg_type"] == "execute_result":
                warm.append(message["content"]["data"]["text/plain"])

        while True:
            warm.clear()
            client.execute_interactive(probe, output_hook=keep, timeout=30)
            if warm and int(warm[0]) >= size:
                return replied, (time.perf_counter() - started) * 1000
            if time.perf_counter() - started > 60:
                raise RuntimeError("the pool did not warm up within 60 s")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000, help="warm round trips")
    parser.add_argument("--fresh", type=int, default=20, help="interleaved pooled/fresh pairs")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        settings = load_settings(workspace_dir=str(workspace), sandbox__pool_size=2)
        with Engine(settings) as engine:
            engine.wait_ready()
            backend = engine.sandboxes.backend
            warm = warm_round_trips(engine, args.rounds)
            pooled, fresh = pooled_vs_fresh(engine, settings, args.fresh)
            ok, concurrent_ms = concurrent_sessions(engine, 16, 50)
        replied_ms, ready_ms = kernel_pool_ready(workspace, 2)

    figures = {
        "backend": backend,
        "warm_p50_ms": round(statistics.median(warm), 3),
        "warm_p99_ms": round(percentile(warm, 99), 3),
        "cold_start_ms": round(statistics.median(fresh), 1),
        "pool_ready_ms": round(ready_ms, 1),
        "kernel_reply_ms": round(replied_ms, 1),
        "pooled_vs_fresh": round(statistics.median(fresh) / statistics.median(pooled), 1),
        "sessions_16_ok": ok,
        "sessions_16_ms": round(concurrent_ms, 1),
    }
    rows = [
        (
            "warm round trip p50",
            f"{figures['warm_p50_ms']} ms",
            f"{args.rounds} trivial cells, target <= 5",
        ),
        ("warm round trip p99", f"{figures['warm_p99_ms']} ms", "target <= 20"),
        ("cold start", f"{figures['cold_start_ms']} ms", "new sandbox to first result (median)"),
        (
            "pooled execution",
            f"{statistics.median(pooled):.2f} ms",
            "median, interleaved with fresh",
        ),
        ("pooled vs fresh", f"{figures['pooled_vs_fresh']}x", "target >= 30"),
        ("kernel first reply", f"{figures['kernel_reply_ms']} ms", "launch to kernel_info_reply"),
        ("pool ready", f"{figures['pool_ready_ms']} ms", "kernel launch to 2 warm, target <= 2000"),
        (
            "16 sessions x 50 cells",
            "all correct" if ok else "FAILED",
            f"{figures['sessions_16_ms']:.0f} ms",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"sandbox benchmark ({backend})")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>12}  {note}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
