"""From a request and the disclosed tools to Python code: a model when one is configured, rules otherwise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, Field

from ..config import Settings
from .prompt import PromptContext

TokenCallback = Callable[[str], None]


class GeneratedCode(BaseModel):
    """Code for review, and where it came from."""

    code: str
    generator: str  # "rules" or "model"
    model: str | None = None
    tools_used: list[str] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1
    notes: list[str] = Field(default_factory=list)


class Generator(Protocol):
    name: str

    async def generate(
        self, context: PromptContext, on_token: TokenCallback | None = None
    ) -> GeneratedCode: ...

    async def aclose(self) -> None: ...


def make_generator(settings: Settings) -> Generator:
    """The configured model, else the rule-based generator."""
    if settings.model.configured:
        from .model import ModelGenerator

        return ModelGenerator(settings.model)
    from .rules import RuleGenerator

    return RuleGenerator()


HOW_TO_CONFIGURE = (
    "To let a model write the code, configure an OpenAI-compatible endpoint: set OPENAI_API_KEY "
    "(and OPENAI_BASE_URL for vLLM, Ollama, llama.cpp or another server; AZURE_OPENAI_* for "
    "Azure), in the environment or the project's .env, or in the notebook: "
    "%mcp_config model.base_url=http://localhost:11434/v1 model.name=llama3.1"
)
