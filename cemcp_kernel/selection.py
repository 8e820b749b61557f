"""Choosing the few tools a request needs: the progressive-disclosure step.

BM25 over each tool's name, server, docstring and parameter names. Words are split on case and
underscores so that ``get_weather`` matches "weather".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from .catalog import Catalog, ToolSpec
from .errors import SelectionError

_WORD = re.compile(r"[A-Za-z][a-z]*|[a-z]+|\d+")
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


def tokenize(text: str) -> list[str]:
    """Lowercase words; camelCase and snake_case split into their parts."""
    words = []
    for raw in re.findall(r"[A-Za-z0-9]+", text):
        parts = _WORD.findall(raw) or [raw]
        words += [p.lower() for p in parts]
        if len(parts) > 1:
            words.append(raw.lower())
    return [w for w in words if w not in STOPWORDS]


def tool_document(tool: ToolSpec) -> str:
    params = " ".join(p.name for p in tool.params)
    return f"{tool.name} {tool.server} {tool.description} {params}"


@dataclass(frozen=True)
class Scored:
    tool: ToolSpec
    score: float


class BM25:
    """Okapi BM25 (k1=1.5, b=0.75) over tokenized documents."""

    def __init__(self, documents: list[list[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.frequencies = [Counter(doc) for doc in documents]
        self.lengths = [len(doc) for doc in documents]
        self.average = sum(self.lengths) / len(documents) if documents else 0.0
        df: Counter[str] = Counter()
        for counts in self.frequencies:
            df.update(counts.keys())
        n = len(documents)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[int]] = {}
        for index, counts in enumerate(self.frequencies):
            for term in counts:
                self.postings.setdefault(term, []).append(index)

    def scores(self, query: list[str]) -> dict[int, float]:
        """Scores of the documents that share at least one term with the query."""
        out: dict[int, float] = {}
        for term in set(query):
            idf = self.idf.get(term)
            if idf is None:
                continue
            for index in self.postings[term]:
                tf = self.frequencies[index][term]
                norm = 1 - self.b + self.b * self.lengths[index] / (self.average or 1)
                out[index] = out.get(index, 0.0) + idf * tf * (self.k1 + 1) / (tf + self.k1 * norm)
        return out


class Selector:
    """Ranks a catalog's tools for a request."""

    mode = "keyword (BM25)"

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.index = BM25([tokenize(tool_document(t)) for t in catalog.tools])

    def search(self, request: str, k: int = 5) -> list[Scored]:
        scores = self.index.scores(tokenize(request))
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
        return [Scored(self.catalog.tools[i], round(s, 4)) for i, s in ranked]

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
