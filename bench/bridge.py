"""How much the bridge adds to a tool call: sandbox -> host -> live stdio server -> back, against
the same call made on the host with the ``mcp`` SDK alone. Both measured in one run, interleaved
call by call, each against its own process of the same server.

    python bench/bridge.py [--calls N]

Prints a table, then (last line) one JSON object with tool_call_p50_ms, direct_call_p50_ms and
bridge_overhead_ratio. Uses server-everything's echo (``make setup`` installs it), else
mcp-server-time's get_current_time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cemcp_kernel.bridge.config import load_server, resolve  # noqa: E402
from cemcp_kernel.bridge.session import LiveSession  # noqa: E402
from cemcp_kernel.config import load_settings  # noqa: E402
from cemcp_kernel.engine import Engine  # noqa: E402

T = TypeVar("T")
EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"


def _server() -> tuple[dict[str, Any], str, dict[str, Any]]:
    if EVERYTHING.exists():
        return {"command": str(EVERYTHING), "args": ["stdio"]}, "echo", {"message": "ping"}
    return {"command": "mcp-server-time"}, "get_current_time", {"timezone": "UTC"}


class _Loop:
    """An event loop on its own thread, for the direct SDK session."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()

    config, tool, arguments = _server()
    with tempfile.TemporaryDirectory(prefix="cemcp-bench-") as tmp:
        project = Path(tmp)
        (project / "servers" / "bench").mkdir(parents=True)
        (project / "servers" / "bench" / "server.json").write_text(json.dumps(config))
        (project / "workspace").mkdir()
        settings = load_settings(project, sandbox__pool_size=1)

        direct_loop = _Loop()
        direct = LiveSession(
            "bench", resolve(load_server(project / "servers" / "bench"), "bench", project)
        )
        direct_loop.run(direct.start())

        async def direct_call() -> float:
            started = time.perf_counter()
            await direct.call(tool, arguments, 30)
            return (time.perf_counter() - started) * 1000

        cell = (
            "import time\nfrom cemcp_sandbox import call_tool\n"
            f"_t = time.perf_counter()\ncall_tool('bench', {tool!r}, {arguments!r})\n"
            "(time.perf_counter() - _t) * 1000"
        )
        bridged: list[float] = []
        direct_ms: list[float] = []
        with Engine(settings) as engine:
            engine.wait_ready()
            for i in range(args.warmup + args.calls):
                result = engine.execute(cell)
                if result.error is not None:
                    raise SystemExit(f"bridged call failed: {result.error.evalue}")
                one_direct = direct_loop.run(direct_call())
                if i >= args.warmup:
                    bridged.append(float(result.value.data))
                    direct_ms.append(one_direct)
        direct_loop.run(direct.close())
        direct_loop.close()

    rows = [("through the bridge", bridged), ("host SDK alone", direct_ms)]
    print(f"{tool} on {Path(config['command']).name}, {args.calls} calls each, interleaved")
    print(f"{'path':22} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8} {'min ms':>8}")
    for name, values in rows:
        print(
            f"{name:22} {statistics.median(values):8.3f} {_percentile(values, 0.9):8.3f} "
            f"{statistics.fmean(values):8.3f} {min(values):8.3f}"
        )
    p50_bridge, p50_direct = statistics.median(bridged), statistics.median(direct_ms)
    print(f"bridge overhead: {p50_bridge - p50_direct:.3f} ms per call at p50")
    print(
        json.dumps(
            {
                "tool_call_p50_ms": round(p50_bridge, 3),
                "direct_call_p50_ms": round(p50_direct, 3),
                "bridge_overhead_ratio": round(p50_bridge / p50_direct, 3),
                "tool_call_p90_ms": round(_percentile(bridged, 0.9), 3),
                "direct_call_p90_ms": round(_percentile(direct_ms, 0.9), 3),
                "calls": args.calls,
                "tool": tool,
            }
        )
    )


if __name__ == "__main__":
    main()
