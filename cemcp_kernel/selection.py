"""Choosing the few tools a request needs: the progressive-disclosure step.

Two rankers over the catalog, fused when both are available:

- BM25 over each tool's name, server, docstring and parameter names. Words are split on case
  and underscores (``get_weather`` matches "weather") and stemmed ("files" matches "file").
- Dense embeddings (``embeddings.py``, the ``semantic`` extra): cosine similarity between the
  request and each tool, which finds tools whose docstring uses other words than the request.

Fusion standardises each ranker's scores over the catalog (z-scores) and weights them;
``bench/retrieval.py`` measured the weights against reciprocal rank fusion and plain weighting.
Without the dense side (extra missing, model still loading, disabled) BM25 answers alone, and
:attr:`Selector.mode` says so.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .catalog import Catalog, ToolSpec
from .errors import SelectionError

if TYPE_CHECKING:
    from .embeddings import DenseIndex

# Weight of the dense z-score in the fused score (BM25 gets the rest), and the cosine a tool needs
# to be a candidate when no request word matches it. Measured with bench/retrieval.py on MetaTool.
DENSE_WEIGHT = 0.75
MIN_SIMILARITY = 0.1

_RAW = re.compile(r"[A-Za-z0-9]+")
WORD_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "get",
        "give",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "show",
        "tell",
        "that",
        "the",
        "this",
        "to",
        "use",
        "using",
        "what",
        "which",
        "with",
        "you",
        "your",
    ]
)


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    from snowballstemmer.english_stemmer import EnglishStemmer

    return EnglishStemmer()


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """Snowball (Porter 2) stem of a lowercase word; cached, since vocabularies repeat."""
    return str(_stemmer().stemWord(word))


def tokenize(text: str, stemmed: bool = True) -> list[str]:
    """Lowercase words; camelCase, ACRONYMS and snake_case split into their parts, then stemmed."""
    return [token for raw in _RAW.findall(text) for token in _word_tokens(raw, stemmed)]


@lru_cache(maxsize=1 << 16)
def _word_tokens(raw: str, stemmed: bool) -> tuple[str, ...]:
    parts = WORD_PARTS.findall(raw) or [raw]
    words = [p.lower() for p in parts] + ([raw.lower()] if len(parts) > 1 else [])
    words = [w for w in words if w not in STOPWORDS]
    return tuple(stem(w) for w in words) if stemmed else tuple(words)


def tool_document(tool: ToolSpec) -> str:
    params = " ".join(p.name for p in tool.params)
    return f"{tool.name} {tool.server} {tool.description} {params}"


@dataclass(frozen=True)
class Scored:
    tool: ToolSpec
    score: float


class BM25:
    """Okapi BM25 (k1=1.5, b=0.75) with each term's contribution to each document precomputed.

    A query's score is then one vector addition per query term, which keeps selection within a
    few milliseconds on catalogs of ten thousand tools.
    """

    def __init__(self, documents: list[list[str]], k1: float = 1.5, b: float = 0.75) -> None:
        import numpy as np

        self.size = len(documents)
        lengths = [len(doc) for doc in documents]
        average = (sum(lengths) / len(documents) if documents else 0.0) or 1.0
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for index, doc in enumerate(documents):
            norm = k1 * (1 - b + b * lengths[index] / average)
            for term, tf in Counter(doc).items():
                rows, weights = postings.setdefault(term, ([], []))
                rows.append(index)
                weights.append(tf * (k1 + 1) / (tf + norm))
        self.postings: dict[str, tuple[Any, Any]] = {}
        for term, (rows, weights) in postings.items():
            idf = math.log(1 + (self.size - len(rows) + 0.5) / (len(rows) + 0.5))
            self.postings[term] = (
                np.asarray(rows, dtype=np.int64),
                np.asarray(weights, dtype=np.float32) * idf,
            )

    def score_array(self, query: list[str]) -> Any:
        """Scores of every document (numpy float32); zero for those sharing no query term."""
        import numpy as np

        scores = np.zeros(self.size, dtype=np.float32)
        for term in set(query):
            posting = self.postings.get(term)
            if posting is not None:
                scores[posting[0]] += posting[1]
        return scores

    def scores(self, query: list[str]) -> dict[int, float]:
        """Scores of the documents that share at least one term with the query."""
        array = self.score_array(query)
        return {int(i): float(array[i]) for i in array.nonzero()[0]}


class Selector:
    """Ranks a catalog's tools for a request: BM25, fused with dense similarity when given.

    ``stemmed=False`` tokenizes as the usual BM25 baselines do (benchmarks compare with them).
    """

    def __init__(
        self,
        catalog: Catalog,
        dense: DenseIndex | None = None,
        keyword_reason: str = "",
        stemmed: bool = True,
    ) -> None:
        self.catalog = catalog
        self.stemmed = stemmed
        self.index = BM25([tokenize(tool_document(t), stemmed) for t in catalog.tools])
        self.dense = dense
        self.keyword_reason = keyword_reason

    @property
    def mode(self) -> str:
        if self.dense is not None:
            return f"hybrid (BM25 + {self.dense.model_name})"
        return "keyword (BM25)" + (f": {self.keyword_reason}" if self.keyword_reason else "")

    def search(self, request: str, k: int = 5) -> list[Scored]:
        return self.rank(*self.scores(request), k=k)

    def scores(self, request: str) -> tuple[Any, Any | None]:
        """(BM25 scores, cosine similarities or None) of every tool, in catalog order."""
        lexical = self.index.score_array(tokenize(request, self.stemmed))
        dense = self.dense.similarities(request) if self.dense is not None else None
        return lexical, dense

    def rank(self, lexical: Any, similarity: Any | None, k: int = 5) -> list[Scored]:
        """The k best tools: by BM25 alone, or by the fused score when similarities are given."""
        if similarity is None:
            return self._top(lexical, lexical > 0, k)
        candidates = (lexical > 0) | (similarity >= MIN_SIMILARITY)
        fused = DENSE_WEIGHT * _standardised(similarity)
        fused += (1 - DENSE_WEIGHT) * _standardised(lexical)
        return self._top(fused, candidates, k)

    def _top(self, scores: Any, candidates: Any, k: int) -> list[Scored]:
        import numpy as np

        rows = np.flatnonzero(candidates)
        if len(rows) > k:
            rows = rows[np.argpartition(-scores[rows], k - 1)[:k]]
        ranked = sorted(rows.tolist(), key=lambda i: (-float(scores[i]), i))
        return [Scored(self.catalog.tools[i], round(float(scores[i]), 4)) for i in ranked]

    def pick(self, names: list[str]) -> list[Scored]:
        """Tools named by the user (``--tools calculator.add,data.query``), in that order."""
        chosen = []
        for name in names:
            tool = self.catalog.get(name)
            if tool is None:
                known = ", ".join(t.qualname for t in self.catalog.tools[:20])
                raise SelectionError(f"No tool named {name!r}. Known tools include: {known}")
            chosen.append(Scored(tool, 1.0))
        return chosen


def _standardised(scores: Any) -> Any:
    """Scores as z-scores over the catalog, so that BM25 and cosine scales can be added."""
    spread = float(scores.std())
    return (scores - scores.mean()) / (spread if spread > 0 else 1.0)
