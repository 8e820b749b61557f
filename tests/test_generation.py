"""Code generation against a scripted OpenAI-compatible server, through the real openai client."""

from __future__ import annotations

import asyncio

import pytest

from cemcp_kernel.catalog import Discovery
from cemcp_kernel.config import ModelSettings
from cemcp_kernel.engine import Engine
from cemcp_kernel.errors import GenerationError
from cemcp_kernel.generation import GeneratedCode
from cemcp_kernel.generation.model import ModelGenerator
from cemcp_kernel.generation.prompt import PromptContext
from cemcp_kernel.scripted_model import Reply, ScriptedOpenAI

from .conftest import ROOT

CATALOG = Discovery().discover(ROOT / "servers", ROOT / "skills")
GOOD = "from servers.calculator.add import add\n\nadd(2, 3)\n"


def context(request: str = "add 2 and 3") -> PromptContext:
    tools = [t for t in CATALOG.tools if t.qualname == "calculator.add"]
    return PromptContext(request=request, tools=tools, all_tools=CATALOG.tools)


def run(model: ModelSettings, on_token=None) -> GeneratedCode:
    async def generate_and_close() -> GeneratedCode:
        generator = ModelGenerator(model)
        try:
            return await generator.generate(context(), on_token)
        finally:
            await generator.aclose()

    return asyncio.run(generate_and_close())


def generate(server: ScriptedOpenAI, on_token=None, **settings) -> GeneratedCode:
    model = ModelSettings(
        base_url=server.base_url, api_key="sk-test", name="test-model", **settings
    )
    return run(model, on_token)


@pytest.mark.parametrize(
    "reply",
    [
        GOOD,
        f"Sure! Here is the code:\n```python\n{GOOD}```\nIt adds the numbers.",
        f"```\n{GOOD}```",
    ],
    ids=["bare", "fenced-with-prose", "fenced-no-language"],
)
def test_code_is_taken_from_plain_and_fenced_replies(
    openai_server: ScriptedOpenAI, reply: str
) -> None:
    openai_server.add(reply)
    generated = generate(openai_server)
    assert generated.code == GOOD
    assert generated.tools_used == ["calculator.add"]
    assert generated.prompt_tokens > 0 and generated.completion_tokens > 0
    body = openai_server.requests[0].body
    assert body["model"] == "test-model"
    system = body["messages"][0]["content"]
    assert "from servers.calculator.add import add" in system
    assert "multiply" not in system  # only the selected tool is disclosed


def test_an_invented_tool_gets_one_repair_round(openai_server: ScriptedOpenAI) -> None:
    openai_server.add(
        "```python\nfrom servers.weather.forecast import forecast\nforecast('Oslo')\n```", GOOD
    )
    generated = generate(openai_server)
    assert generated.code == GOOD and generated.attempts == 2
    repair = openai_server.requests[1].body["messages"][-1]["content"]
    assert "servers.weather.forecast" in repair and "not one of the tools" in repair


def test_garbage_twice_is_a_clear_error_with_what_the_model_said(
    openai_server: ScriptedOpenAI,
) -> None:
    openai_server.add("I cannot help with that (", "def broken(:")
    with pytest.raises(GenerationError) as info:
        generate(openai_server)
    message = str(info.value)
    assert "even after a repair round" in message and "def broken(:" in message


def test_rate_limit_is_retried(openai_server: ScriptedOpenAI) -> None:
    openai_server.add(Reply(status=429, error="slow down"), GOOD)
    assert generate(openai_server).code == GOOD
    assert len(openai_server.requests) == 2


def test_server_errors_end_in_a_clear_message(openai_server: ScriptedOpenAI) -> None:
    openai_server.default = Reply(status=500, error="backend exploded")
    with pytest.raises(GenerationError, match="HTTP 500 after 1 retries: backend exploded"):
        generate(openai_server, max_retries=1)
    assert len(openai_server.requests) == 2


def test_a_slow_endpoint_times_out(openai_server: ScriptedOpenAI) -> None:
    openai_server.add(Reply(content=GOOD, delay=3))
    with pytest.raises(GenerationError, match=r"did not answer within 0\.5 s"):
        generate(openai_server, timeout=0.5, max_retries=0)


def test_max_tokens_rejected_switches_to_max_completion_tokens(
    openai_server: ScriptedOpenAI,
) -> None:
    openai_server.add(Reply(reject_param="max_tokens"), GOOD)
    assert generate(openai_server).code == GOOD
    first, second = (r.body for r in openai_server.requests)
    assert "max_tokens" in first and "max_completion_tokens" not in first
    assert "max_completion_tokens" in second and "max_tokens" not in second


def test_max_completion_tokens_rejected_switches_to_max_tokens(
    openai_server: ScriptedOpenAI,
) -> None:
    openai_server.add(Reply(reject_param="max_completion_tokens"), GOOD)
    model = ModelSettings(base_url=openai_server.base_url, api_key="k", name="o3-mini")
    assert asyncio.run(ModelGenerator(model).generate(context())).code == GOOD
    first, second = (r.body for r in openai_server.requests)
    assert first["max_completion_tokens"] == 2048 and "max_tokens" not in first
    assert second["max_tokens"] == 2048 and "max_completion_tokens" not in second


def test_azure_deployment_urls(openai_server: ScriptedOpenAI) -> None:
    openai_server.add(GOOD)
    model = ModelSettings(
        azure_endpoint=openai_server.root_url,
        azure_api_key="azure-key",
        azure_deployment="my-gpt",
        azure_api_version="2024-10-21",
    )
    assert run(model).code == GOOD
    request = openai_server.requests[0]
    assert request.path == "/openai/deployments/my-gpt/chat/completions?api-version=2024-10-21"
    assert request.headers["api-key"] == "azure-key"


def test_streaming_delivers_tokens_as_they_come(openai_server: ScriptedOpenAI) -> None:
    openai_server.add(f"```python\n{GOOD}```")
    tokens: list[str] = []
    generated = generate(openai_server, on_token=tokens.append)
    assert generated.code == GOOD
    assert len(tokens) > 3 and "".join(tokens) == f"```python\n{GOOD}```"
    assert openai_server.requests[0].body["stream"] is True
    assert generated.completion_tokens > 0


def test_earlier_turns_are_summarised_not_replayed(openai_server: ScriptedOpenAI, settings) -> None:
    openai_server.add(
        "```python\nrows = list(range(1000))\nlen(rows)\n```", "```python\nsum(rows)\n```"
    )
    configured = settings.updated({"model.base_url": openai_server.base_url, "model.api_key": "k"})
    with Engine(configured) as engine:
        first = engine.run("make a thousand rows")
        assert first is not None and first.result.value.data == 1000
        second = engine.run("add them up")
        assert second is not None and second.result.value.data == 499500
    messages = openai_server.requests[1].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "rows = list(range(1000))" in messages[2]["content"]
    assert "result: builtins.int: 1000" in messages[2]["content"]
    assert "999" not in messages[2]["content"]  # the data itself stays in the sandbox
