"""Tool retrieval: recall of BM25, dense and hybrid selection, and selection at scale.

    python bench/retrieval.py [DATASET_DIR]      recall@1/5/10 on a tools.jsonl + queries.jsonl set
    python bench/retrieval.py --synthetic 10000  discovery, index and selection times, memory

DATASET_DIR defaults to ../shared/bench/tool_retrieval/metatool next to this repository. The
tools are written as real tool files and go through the project's own Discovery and Selector,
so the figures are those of the code a notebook runs. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from toolsets import synthetic_requests, write_dataset, write_synthetic

from cemcp_kernel.catalog import Discovery
from cemcp_kernel.embeddings import (
    DenseIndex,
    EmbeddingCache,
    cache_file,
    load_embedder,
    missing_packages,
)
from cemcp_kernel.selection import Selector

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = REPO.parent / "shared" / "bench" / "tool_retrieval" / "metatool"
KS = (1, 5, 10)
RRF_K = 60


def rss_mb() -> float:
    """Resident memory of this process now (Linux), else its peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


# --- recall on a dataset -------------------------------------------------------------------------


def load_queries(folder: Path) -> list[dict[str, Any]]:
    queries = []
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            item.setdefault("split", "single" if len(item["tools"]) == 1 else "multi")
            queries.append(item)
    return queries


def recall(rankings: list[list[str]], queries: list[dict[str, Any]], k: int) -> float:
    """Share of each query's gold tools in its top k, averaged over queries."""
    shares = [
        len(set(ranked[:k]) & set(q["tools"])) / len(q["tools"])
        for ranked, q in zip(rankings, queries, strict=True)
    ]
    return sum(shares) / len(shares) if shares else 0.0


def rrf(lexical: Any, similarity: Any, depth: int = 50) -> list[int]:
    """Reciprocal rank fusion of the two rankings (the usual alternative, for comparison)."""
    import numpy as np

    fused: dict[int, float] = {}
    for scores, floor in ((lexical, 0.0), (similarity, -1.0)):
        order = np.argsort(-scores, kind="stable")[:depth]
        for rank, row in enumerate(order.tolist()):
            if scores[row] > floor:
                fused[row] = fused.get(row, 0.0) + 1 / (RRF_K + rank + 1)
    return sorted(fused, key=lambda row: -fused[row])


def run_dataset(folder: Path, use_dense: bool) -> dict[str, Any]:
    queries = load_queries(folder)
    with tempfile.TemporaryDirectory(prefix="cemcp-bench-") as tmp:
        written = write_dataset(folder / "tools.jsonl", Path(tmp), server=folder.name)
        catalog = Discovery().discover(Path(tmp) / "servers", None)
    by_function = {t.function: t.name for t in written}
    names = [by_function[t.name] for t in catalog.tools]
    selector = Selector(catalog)
    reference = Selector(catalog, stemmed=False)
    rankers: dict[str, list[list[str]]] = {"bm25_reference": [], "bm25": []}
    label = {
        "bm25_reference": "BM25, no stemming (the dataset README's baseline)",
        "bm25": "BM25 as cemcp ranks (stemmed)",
        "dense": "dense (all-MiniLM-L6-v2)",
        "rrf": f"hybrid by reciprocal rank fusion (k={RRF_K})",
        "hybrid": "hybrid as cemcp ranks (z-score fusion)",
    }
    if use_dense:
        started = time.perf_counter()
        embedder = load_embedder()
        selector.dense = DenseIndex.build(embedder, catalog.tools, EmbeddingCache(None, "-"))
        print(f"model loaded and {len(names)} tools embedded in {ms(started) / 1000:.1f} s")
        rankers.update(dense=[], rrf=[], hybrid=[])

    def top(rows: list[int]) -> list[str]:
        return [names[i] for i in rows[: max(KS)]]

    def chosen(scored: list[Any]) -> list[str]:
        return [by_function[s.tool.name] for s in scored]

    started = time.perf_counter()
    for query in queries:
        text = query["query"]
        rankers["bm25_reference"].append(chosen(reference.search(text, max(KS))))
        lexical, similarity = selector.scores(text)
        rankers["bm25"].append(chosen(selector.rank(lexical, None, max(KS))))
        if similarity is not None:
            import numpy as np

            rankers["dense"].append(top(np.argsort(-similarity, kind="stable").tolist()))
            rankers["rrf"].append(top(rrf(lexical, similarity)))
            rankers["hybrid"].append(chosen(selector.rank(lexical, similarity, max(KS))))
    per_query = ms(started) / len(queries)

    splits = sorted({q["split"] for q in queries})
    subsets = {"all": list(range(len(queries)))} | {
        split: [i for i, q in enumerate(queries) if q["split"] == split] for split in splits
    }
    print(
        f"\n{folder.name}: {len(names)} tools, {len(queries)} queries ("
        + ", ".join(f"{len(subsets[s])} {s}" for s in splits)
        + ")"
    )
    header = f"{'ranker':52} {'subset':8} " + " ".join(f"{'R@' + str(k):>6}" for k in KS)
    print(header + "\n" + "-" * len(header))
    summary: dict[str, Any] = {"dataset": folder.name, "tools": len(names), "queries": len(queries)}
    for name, rankings in rankers.items():
        for subset, members in subsets.items():
            picked = [rankings[i] for i in members]
            row = {k: recall(picked, [queries[i] for i in members], k) for k in KS}
            print(f"{label[name]:52} {subset:8} " + " ".join(f"{row[k]:6.3f}" for k in KS))
            if subset == "all":
                summary |= {f"{name}_r{k}": round(row[k], 3) for k in KS}
    if "hybrid" in rankers:  # the fusion weights were tuned on this data: are both halves alike?
        for half, parity in (("even", 0), ("odd", 1)):
            members = range(parity, len(queries), 2)
            picked = [rankers["hybrid"][i] for i in members]
            summary[f"hybrid_r5_{half}_queries"] = round(
                recall(picked, [queries[i] for i in members], 5), 3
            )
    summary["ms_per_query_all_rankers"] = round(per_query, 1)
    if not use_dense:
        summary["dense"] = f"not measured: {', '.join(missing_packages())} missing"
    return summary


# --- selection at scale --------------------------------------------------------------------------


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(ms(started))
    return times


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run_synthetic(count: int, use_dense: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"tools": count}
    rows: list[tuple[str, str]] = []

    def note(name: str, value: float, unit: str = "ms") -> None:
        out[f"{name}_{unit}"] = round(value, 1)
        rows.append((name.replace("_", " "), f"{value:,.1f} {unit}"))

    with tempfile.TemporaryDirectory(prefix="cemcp-bench-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        tools = write_synthetic(root, count)
        note("write_files", ms(started))
        servers = root / "servers"
        discovery_cache = root / "cache" / "catalog.json"

        started = time.perf_counter()
        catalog = Discovery(discovery_cache).discover(servers, None)
        note("discovery_cold", ms(started))
        assert len(catalog.tools) == count, (len(catalog.tools), catalog.problems[:3])
        started = time.perf_counter()
        discovery = Discovery(discovery_cache)
        discovery.discover(servers, None)
        note("discovery_from_disk_cache", ms(started))
        warm = timed(lambda: discovery.discover(servers, None), 20)
        note("discovery_warm", statistics.median(warm))

        started = time.perf_counter()
        selector = Selector(catalog)
        note("bm25_index_build", ms(started))
        requests = list(dict.fromkeys(synthetic_requests(tools, 300)))
        keyword = [t for r in requests for t in timed(lambda r=r: selector.search(r), 1)]
        note("select_keyword_p50", statistics.median(keyword))
        out["rss_keyword_mb"] = round(rss_mb(), 1)
        rows.append(("RSS after discovery and BM25", f"{out['rss_keyword_mb']:,.0f} MB"))

        if use_dense:
            started = time.perf_counter()
            embedder = load_embedder()
            note("model_load", ms(started) / 1000, "s")
            path = cache_file(root / "cache")
            started = time.perf_counter()
            cache = EmbeddingCache(path, embedder.name)
            DenseIndex.build(embedder, catalog.tools, cache)
            cache.save()
            note("embed_catalog_cold", ms(started) / 1000, "s")
            started = time.perf_counter()
            selector.dense = DenseIndex.build(
                embedder, catalog.tools, EmbeddingCache(path, embedder.name)
            )
            note("dense_index_from_cache", ms(started))
            for request in requests[:5]:  # first calls pay one-off allocations
                selector.search(request)
            hybrid, cpu = [], []
            for request in requests:
                started, cpu_started = time.perf_counter(), time.process_time()
                selector.search(request)
                hybrid.append(ms(started))
                cpu.append((time.process_time() - cpu_started) * 1000)
            note("select_hybrid_p50", statistics.median(hybrid))
            note("select_hybrid_p95", percentile(hybrid, 0.95))
            note("select_hybrid_cpu_p50", statistics.median(cpu))
            out["select_p50_ms"] = out["select_hybrid_p50_ms"]
            out["rss_mb"] = round(rss_mb(), 1)
            rows.append(("RSS with the model and dense index", f"{out['rss_mb']:,.0f} MB"))
        else:
            out["select_p50_ms"] = out["select_keyword_p50_ms"]
            out["rss_mb"] = out["rss_keyword_mb"]
            out["dense"] = f"not measured: {', '.join(missing_packages())} missing"

    print(f"\nsynthetic catalog of {count:,} tool files ({len(requests)} distinct requests)")
    print(f"  (load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:{width}}  {value:>12}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--synthetic", type=int, metavar="N", help="time a catalog of N tools")
    parser.add_argument("--no-dense", action="store_true", help="BM25 only")
    args = parser.parse_args(argv)
    use_dense = not args.no_dense and not missing_packages()
    if not use_dense and not args.no_dense:
        print(f"dense selection not measured: {', '.join(missing_packages())} not installed")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.synthetic:
        summary = run_synthetic(args.synthetic, use_dense)
    else:
        folder = args.dataset.resolve()
        if not (folder / "tools.jsonl").is_file() or not (folder / "queries.jsonl").is_file():
            print(
                f"No retrieval dataset at {folder}: pass a folder holding tools.jsonl and "
                "queries.jsonl (see its README), e.g. python bench/retrieval.py DATASET_DIR",
                file=sys.stderr,
            )
            return 2
        summary = run_dataset(folder, use_dense)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
