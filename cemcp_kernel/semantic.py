"""Getting the dense side of selection ready without ever making a request wait for it.

Loading the model imports torch (seconds) and embedding a large catalog takes longer still, so
both run on one worker thread owned by the engine, started by the first request that needs
selection, never at kernel start. Until the index of the current catalog is ready, requests
are answered by BM25 alone and :attr:`SemanticIndexer.reason` says why. The worker is a thread
of its own rather than the engine's event loop, which keeps serving model calls and the
sandbox pool meanwhile.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from .catalog import Catalog
from .embeddings import (
    INSTALL_HINT,
    DenseIndex,
    Embedder,
    EmbeddingCache,
    description_text,
    load_embedder,
    missing_packages,
    name_text,
)


class _Closed(Exception):
    """The engine closed while the catalog was being embedded."""


State = Literal["off", "unavailable", "idle", "loading", "ready", "failed"]
# A catalog with at most this many tools not embedded yet is embedded in the request itself
# (tens of milliseconds), so that editing one tool file does not fall back to BM25.
INLINE_LIMIT = 16


class SemanticIndexer:
    """The engine's dense index: model loading, catalog embedding, and why it is not ready."""

    def __init__(
        self,
        enabled: bool,
        cache_path: Path | None,
        load: Callable[[], Embedder] = load_embedder,
        wait: bool = False,
    ) -> None:
        """``wait``: :meth:`index_for` waits for the index instead of returning None meanwhile."""
        self._load = load
        self._wait_for_index = wait
        self._cache_path = cache_path
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._job: concurrent.futures.Future[None] | None = None
        self._embedder: Embedder | None = None
        self._cache: EmbeddingCache | None = None
        self._index: DenseIndex | None = None
        self._index_key = ""
        self._building = ""
        self._closed = False
        self.error = ""
        self.missing = missing_packages() if enabled else []
        self.state: State = "off" if not enabled else "unavailable" if self.missing else "idle"

    @property
    def reason(self) -> str:
        """Why selection is keyword-only right now (empty when the dense index is in use)."""
        if self.state == "off":
            return "semantic selection is off (selection.semantic = false)"
        if self.state == "unavailable":
            return f"semantic selection needs {', '.join(self.missing)}: {INSTALL_HINT}"
        if self.state == "failed":
            return f"the semantic model failed to load: {self.error}"
        if self.state in ("idle", "loading"):
            return "the semantic model is loading in the background"
        if self._building:
            return "embedding the catalog's tools in the background"
        return ""

    def index_for(self, catalog: Catalog, key: str) -> DenseIndex | None:
        """The catalog's dense index when ready; otherwise start what is missing, return None."""
        index = self._index_or_start(catalog, key)
        for _ in range(2):  # loading was for another catalog: embed this one after it
            if index is not None or not self._wait_for_index or self._job is None:
                break
            self.wait()
            index = self._index_or_start(catalog, key)
        return index

    def _index_or_start(self, catalog: Catalog, key: str) -> DenseIndex | None:
        with self._lock:
            if self._closed or self.state in ("off", "unavailable", "failed"):
                return None
            if self._index is not None and key == self._index_key:
                return self._index
            if self.state == "idle":
                self.state = "loading"
                self._submit(catalog, key, load=True)
                return None
            if self.state == "loading" or self._building == key:
                return None
            assert self._cache is not None
            texts = [f(t) for t in catalog.tools for f in (description_text, name_text)]
            inline = self._cache.missing(texts) <= INLINE_LIMIT and not self._building
            if not inline:
                self._submit(catalog, key, load=False)
                return None
        self._build(catalog, key)
        return self._index if self._index_key == key else None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the work under way; True when an index is ready afterwards."""
        job = self._job
        if job is not None:
            concurrent.futures.wait([job], timeout=timeout)
        return self._index is not None and not self._building

    def close(self) -> None:
        """Stop between batches: a closing kernel must not wait minutes for a large catalog."""
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def _submit(self, catalog: Catalog, key: str, load: bool) -> None:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="cemcp-embeddings"
            )
        self._building = key
        self._job = self._executor.submit(self._work, catalog, key, load)

    def _work(self, catalog: Catalog, key: str, load: bool) -> None:
        try:
            if load:
                embedder = self._load()
                cache = EmbeddingCache(self._cache_path, embedder.name)
                with self._lock:
                    self._embedder, self._cache, self.state = embedder, cache, "ready"
            self._build(catalog, key)
        except _Closed:
            pass
        except Exception as exc:  # any failure of an optional extra leaves BM25 working
            with self._lock:
                self.state, self.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            with self._lock:
                if self._building == key:
                    self._building = ""

    def _build(self, catalog: Catalog, key: str) -> None:
        embedder, cache = self._embedder, self._cache
        assert embedder is not None and cache is not None

        def encode(texts: list[str]) -> Any:
            if self._closed:
                raise _Closed
            return embedder.encode(texts)

        with self._build_lock:
            try:
                index = DenseIndex.build(embedder, catalog.tools, cache, encode)
            finally:
                cache.save()  # what was embedded is kept, even when stopped half-way
        with self._lock:
            self._index, self._index_key = index, key
