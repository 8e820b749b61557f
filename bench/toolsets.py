"""Tool trees for the benchmarks, written as real ``servers/<server>/<tool>.py`` files.

Benchmarks discover them with the project's own ``Discovery`` and rank them with its own
``Selector``, so what they measure is the code that runs in a notebook.

- :func:`write_dataset`: a retrieval dataset (``tools.jsonl``: name, description) as one server.
- :func:`write_synthetic`: a catalog of any size with varied, realistic-looking tools, from a
  fixed seed, and requests that name what one of its tools does.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

_IDENT = re.compile(r"\W")


@dataclass(frozen=True)
class DatasetTool:
    name: str  # the dataset's name for the tool
    function: str  # the Python identifier it was written as
    description: str


def _identifier(name: str, taken: set[str]) -> str:
    ident = _IDENT.sub("_", name)
    if not ident or ident[0].isdigit():
        ident = f"t_{ident}"
    base, n = ident, 2
    while ident in taken:
        ident, n = f"{base}_{n}", n + 1
    taken.add(ident)
    return ident


def write_dataset(tools_jsonl: Path, root: Path, server: str = "dataset") -> list[DatasetTool]:
    """One tool file per dataset tool under ``root/servers/<server>/``; the docstring is its description."""
    folder = root / "servers" / server
    folder.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    tools = []
    for line in tools_jsonl.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        function = _identifier(str(item["name"]), taken)
        description = str(item.get("description", ""))
        (folder / f"{function}.py").write_text(
            f"def {function}() -> None:\n    {json.dumps(description)}\n", encoding="utf-8"
        )
        tools.append(DatasetTool(str(item["name"]), function, description))
    return tools


_DOMAINS = {
    "weather": ["forecast", "temperature", "rainfall", "wind speed", "air quality", "storm alert"],
    "calendar": ["event", "meeting", "reminder", "availability", "invitation", "time zone"],
    "github": ["issue", "pull request", "repository", "commit", "release", "workflow run"],
    "slack": ["message", "channel", "thread", "user status", "emoji reaction", "file upload"],
    "crm": ["customer", "lead", "opportunity", "account", "contact", "sales pipeline"],
    "billing": ["invoice", "payment", "refund", "subscription", "tax rate", "credit note"],
    "drive": ["document", "folder", "spreadsheet", "permission", "file revision", "shared link"],
    "maps": ["route", "address", "place", "distance", "traffic", "geocode"],
    "database": ["table", "query", "index", "backup", "schema", "row count"],
    "email": ["inbox", "draft", "attachment", "label", "unread message", "mailing list"],
    "hr": ["employee", "payroll", "vacation request", "job posting", "review", "org chart"],
    "shop": ["product", "order", "cart", "inventory", "shipping label", "discount code"],
    "finance": ["stock price", "exchange rate", "portfolio", "dividend", "market index", "bond"],
    "travel": ["flight", "hotel", "train ticket", "car rental", "itinerary", "visa rule"],
    "health": ["appointment", "prescription", "lab result", "symptom", "vaccination", "doctor"],
    "news": ["headline", "article", "topic feed", "press release", "source", "trending story"],
    "music": ["playlist", "song", "album", "artist", "lyrics", "concert"],
    "support": ["ticket", "knowledge article", "escalation", "satisfaction survey", "macro", "sla"],
    "iot": ["sensor reading", "device", "thermostat", "camera clip", "door lock", "energy usage"],
    "analytics": ["page view", "conversion", "funnel", "cohort", "dashboard", "event count"],
}
_VERBS = {
    "get": "Get one {noun} by its id",
    "list": "List {nouns}, newest first",
    "search": "Search {nouns} matching a text query",
    "create": "Create a new {noun}",
    "update": "Update fields of an existing {noun}",
    "delete": "Delete a {noun} permanently",
    "export": "Export {nouns} to CSV in the workspace",
    "summarize": "Summarize recent {nouns} in a few sentences",
    "count": "Count {nouns} in a date range",
    "archive": "Archive an old {noun}",
    "watch": "Subscribe to changes of a {noun}",
    "compare": "Compare two {nouns} side by side",
}
_PARAMS = {
    "get": "id: str",
    "list": "limit: int = 20",
    "search": "query: str, limit: int = 10",
    "create": "name: str, details: dict | None = None",
    "update": "id: str, fields: dict",
    "delete": "id: str",
    "export": "path: str = 'export.csv'",
    "summarize": "days: int = 7",
    "count": "start: str, end: str",
    "archive": "id: str",
    "watch": "id: str, callback_url: str",
    "compare": "first_id: str, second_id: str",
}
_REGIONS = ["", "eu", "us", "asia", "internal", "legacy", "sandbox", "partner", "v2", "archive"]


@dataclass(frozen=True)
class SyntheticTool:
    server: str
    name: str
    description: str


def synthetic_tools(count: int, seed: int = 7) -> list[SyntheticTool]:
    """``count`` distinct tools: (domain, region) servers, verb x noun tools, varied docstrings."""
    rng = random.Random(seed)
    combos = [
        (domain, region, verb, noun)
        for region in _REGIONS
        for domain, nouns in _DOMAINS.items()
        for noun in nouns
        for verb in _VERBS
    ]
    if count > len(combos):
        raise ValueError(f"at most {len(combos)} synthetic tools, not {count}")
    rng.shuffle(combos)
    tools = []
    for domain, region, verb, noun in combos[:count]:
        server = f"{domain}_{region}" if region else domain
        name = f"{verb}_{noun.replace(' ', '_')}"
        nouns = noun + ("es" if noun.endswith("s") else "s")
        what = _VERBS[verb].format(noun=noun, nouns=nouns)
        where = f" in the {region} {domain} service" if region else f" in {domain}"
        extra = rng.choice(
            [
                "",
                " Returns a list of records.",
                " Requires the caller's API token on the server side.",
                f" Results are cached for {rng.randint(1, 60)} minutes.",
                " Large results are written to /workspace instead of returned.",
            ]
        )
        tools.append(SyntheticTool(server, name, f"{what}{where}.{extra}"))
    return tools


def write_synthetic(root: Path, count: int, seed: int = 7) -> list[SyntheticTool]:
    """The synthetic catalog as files under ``root/servers``."""
    tools = synthetic_tools(count, seed)
    for tool in tools:
        folder = root / "servers" / tool.server
        folder.mkdir(parents=True, exist_ok=True)
        verb = tool.name.split("_")[0]
        (folder / f"{tool.name}.py").write_text(
            f"def {tool.name}({_PARAMS[verb]}) -> list[dict]:\n"
            f"    {json.dumps(tool.description)}\n"
            f"    raise NotImplementedError('a benchmark tool')\n",
            encoding="utf-8",
        )
    return tools


def synthetic_requests(tools: list[SyntheticTool], count: int, seed: int = 11) -> list[str]:
    """Plain-language requests, each about what one of the tools does."""
    rng = random.Random(seed)
    openers = ["", "Please ", "Can you ", "I need to ", "Quickly "]
    requests = []
    for tool in rng.sample(tools, min(count, len(tools))):
        verb, *noun = tool.name.split("_")
        domain = tool.server.split("_")[0]
        requests.append(f"{rng.choice(openers)}{verb} the {' '.join(noun)} for {domain}")
    return requests
