"""Hybrid selection with the real all-MiniLM-L6-v2 (skipped, saying why, without the extra),
its background loading in the engine, and the on-disk embedding cache."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cemcp_kernel import semantic
from cemcp_kernel.catalog import Catalog, Discovery
from cemcp_kernel.config import Settings
from cemcp_kernel.embeddings import DenseIndex, Embedder, EmbeddingCache
from cemcp_kernel.engine import Engine
from cemcp_kernel.selection import Selector
from cemcp_kernel.semantic import SemanticIndexer

from .conftest import ROOT

TOOLS = {
    "weather/forecast.py": 'def forecast(city: str) -> dict:\n    """Meteorological outlook for a city: temperature and precipitation."""\n',
    "finance/quote.py": 'def quote(symbol: str) -> float:\n    """Latest trading price of a stock."""\n',
    "mail/send.py": 'def send(to: str, body: str) -> None:\n    """Send an e-mail message."""\n',
    "files/archive.py": 'def archive(path: str) -> str:\n    """Compress a folder into a zip file."""\n',
}
MEANING_ONLY = "Will it rain in Oslo tomorrow?"  # shares no word with any docstring


def write_tools(root: Path, tools: dict[str, str] = TOOLS) -> Path:
    for relative, source in tools.items():
        path = root / "servers" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root / "servers"


class CountingEmbedder(Embedder):
    """The real model, counting the texts it is asked to embed."""

    def __init__(self, real: Embedder) -> None:
        super().__init__(real.model, real.name)
        self.texts: list[str] = []

    def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
        self.texts += texts
        return super().encode(texts)


def test_hybrid_finds_a_tool_by_meaning_where_bm25_finds_none(
    embedder: Embedder, tmp_path: Path
) -> None:
    catalog = Discovery().discover(write_tools(tmp_path), None)
    keyword = Selector(catalog)
    assert keyword.search(MEANING_ONLY) == []
    dense = DenseIndex.build(embedder, catalog.tools, EmbeddingCache(None, embedder.name))
    hybrid = Selector(catalog, dense)
    assert hybrid.mode == "hybrid (BM25 + all-MiniLM-L6-v2)"
    assert hybrid.search(MEANING_ONLY, 1)[0].tool.qualname == "weather.forecast"
    assert hybrid.search("what does Apple stock trade at", 1)[0].tool.qualname == "finance.quote"
    assert hybrid.search("completely unrelated zebra") == []  # no tool is similar enough


def test_keyword_matches_still_count_in_the_fusion(embedder: Embedder) -> None:
    catalog = Discovery().discover(ROOT / "servers", ROOT / "skills")
    dense = DenseIndex.build(embedder, catalog.tools, EmbeddingCache(None, embedder.name))
    hybrid = Selector(catalog, dense)
    assert hybrid.search("multiply 6 by 7")[0].tool.qualname == "calculator.multiply"
    assert hybrid.search("add 5 and 3")[0].tool.qualname == "calculator.add"


def test_embeddings_are_cached_on_disk_by_content(embedder: Embedder, tmp_path: Path) -> None:
    servers = write_tools(tmp_path / "project")
    cache_path = tmp_path / "cache" / "embeddings.npz"
    counting = CountingEmbedder(embedder)
    first_catalog = Discovery().discover(servers, None)
    cache = EmbeddingCache(cache_path, embedder.name)
    first = DenseIndex.build(counting, first_catalog.tools, cache)
    cache.save()
    assert len(counting.texts) == 2 * len(TOOLS) and cache_path.is_file()

    counting.texts.clear()
    again = DenseIndex.build(
        counting, first_catalog.tools, EmbeddingCache(cache_path, embedder.name)
    )
    assert counting.texts == []  # a new process reuses every vector
    assert abs(again.matrix - first.matrix).max() < 2e-3  # stored as float16

    (servers / "mail" / "send.py").write_text(
        'def send(to: str, body: str) -> None:\n    """Deliver a letter by post."""\n'
    )
    changed = Discovery().discover(servers, None)
    DenseIndex.build(counting, changed.tools, EmbeddingCache(cache_path, embedder.name))
    assert counting.texts == ["Deliver a letter by post.. Parameters: to, body"]


def test_the_engine_answers_with_bm25_until_the_model_is_ready(
    embedder: Embedder, settings: Settings
) -> None:
    gate = threading.Event()
    loads: list[str] = []

    def slow_load() -> Embedder:
        loads.append(threading.current_thread().name)
        gate.wait(60)
        return embedder

    indexer = SemanticIndexer(True, None, load=slow_load)
    with Engine(settings, warm=False, semantic=indexer) as engine:
        chosen = engine.select("multiply 6 by 7")
        assert chosen[0].tool.qualname == "calculator.multiply"
        mode = engine.selector().mode
        assert mode == "keyword (BM25): the semantic model is loading in the background"
        plan = engine.plan("multiply 6 by 7")
        assert plan.selection == mode and "multiply" in plan.code
        gate.set()
        assert engine.semantic.wait(60)
        assert engine.selector().mode == "hybrid (BM25 + all-MiniLM-L6-v2)"
        assert engine.plan("Calculate 6 * 7").selection.startswith("hybrid")
    assert loads == ["cemcp-embeddings_0"]  # loaded once, off the caller's thread


def test_an_extra_that_is_missing_or_fails_leaves_bm25_saying_why(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "missing_packages", lambda: ["sentence_transformers"])
    missing = SemanticIndexer(True, None)
    assert missing.state == "unavailable"
    assert "pip install 'cemcp[semantic]'" in missing.reason

    def broken() -> Embedder:
        raise OSError("model.safetensors is truncated")

    monkeypatch.setattr(semantic, "missing_packages", lambda: [])
    failing = SemanticIndexer(True, None, load=broken)
    with Engine(settings, warm=False, semantic=failing) as engine:
        assert engine.select("add 1 and 2")[0].tool.qualname == "calculator.add"
        assert not failing.wait(30)
        assert engine.selector().mode == (
            "keyword (BM25): the semantic model failed to load: "
            "OSError: model.safetensors is truncated"
        )


def test_switching_semantic_selection_off_is_reported(settings: Settings) -> None:
    with Engine(settings, warm=False) as engine:
        assert engine.selector().mode == (
            "keyword (BM25): semantic selection is off (selection.semantic = false)"
        )


def test_an_edited_tool_is_embedded_in_the_request_itself(
    embedder: Embedder, tmp_path: Path
) -> None:
    servers = write_tools(tmp_path)
    indexer = SemanticIndexer(True, None, load=lambda: embedder)
    discovery = Discovery()
    catalog = discovery.discover(servers, None)
    assert indexer.index_for(catalog, catalog.fingerprint()) is None  # starts loading
    assert indexer.wait(60)
    (servers / "files" / "archive.py").write_text(
        'def archive(path: str) -> str:\n    """Pack a directory into a tarball."""\n'
    )
    edited: Catalog = discovery.discover(servers, None)
    assert edited.fingerprint() != catalog.fingerprint()
    index = indexer.index_for(edited, edited.fingerprint())
    assert index is not None and index.matrix.shape[0] == len(TOOLS)
    indexer.close()


def test_the_direct_request_path_gives_the_models_own_vectors(embedder: Embedder) -> None:
    long_request = "summarise " * 400  # beyond the model's 256 tokens: truncated the same way
    for request in (MEANING_ONLY, long_request):
        direct = embedder.encode_one(request)
        assert abs(direct - embedder.encode([request])[0]).max() < 1e-5


def test_closing_stops_before_embedding_more(embedder: Embedder, tmp_path: Path) -> None:
    gate = threading.Event()
    counting = CountingEmbedder(embedder)

    def slow_load() -> Embedder:
        gate.wait(60)
        return counting

    indexer = SemanticIndexer(True, tmp_path / "cache.npz", load=slow_load)
    catalog = Discovery().discover(write_tools(tmp_path), None)
    assert indexer.index_for(catalog, catalog.fingerprint()) is None
    indexer.close()  # the engine closes while the model is still loading
    gate.set()
    assert not indexer.wait(60)
    assert counting.texts == [] and indexer.state == "ready"
    assert indexer.index_for(catalog, catalog.fingerprint()) is None


def test_waiting_selection_is_hybrid_from_the_first_request(
    embedder: Embedder, settings: Settings
) -> None:
    """``selection.wait`` (CI, recorded notebooks): no answer depends on when the model loaded."""
    waiting = settings.updated({"selection.semantic": True, "selection.wait": True})
    with Engine(waiting, warm=False) as engine:  # the process's model: `embedder` loaded it
        assert engine.plan("Calculate 6 * 7").selection == "hybrid (BM25 + all-MiniLM-L6-v2)"
