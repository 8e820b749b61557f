"""The magics in a real InteractiveShell with a real engine and sandbox."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from cemcp_kernel.engine import Engine
from magics.display import CemcpMessage, SandboxCodeError
from magics.magics import McpMagics

from .openai_server import ScriptedOpenAI


@pytest.fixture
def magics(engine: Engine) -> Iterator[McpMagics]:
    shell = InteractiveShell.instance()
    instance = McpMagics(shell, engine=engine)
    shell.register_magics(instance)
    yield instance
    shell.user_ns.pop("answer", None)
    InteractiveShell.clear_instance()


def test_review_run_from_code_stores_the_result(magics: McpMagics) -> None:
    assert magics.mcp("-o answer", "Calculate 2 + 2") is None
    review = magics.last_review
    assert review is not None and review.state == "pending"
    assert "answer" not in magics.shell.user_ns  # nothing ran before approval
    review.run()
    assert review.state == "done"
    assert magics.shell.user_ns["answer"] == 4
    review.run()  # a second click does nothing
    assert magics.engine.log(magics.session).records[-1].summary == "builtins.int: 4"


def test_review_cancel_runs_nothing(magics: McpMagics) -> None:
    magics.mcp("-o answer", "Calculate 3 + 3")
    review = magics.last_review
    assert review is not None
    review.cancel()
    review.run()
    assert review.state == "cancelled" and "answer" not in magics.shell.user_ns


def test_insert_puts_runnable_code_in_the_next_cell(magics: McpMagics) -> None:
    magics.mcp("--insert", "Calculate 6 * 7")
    assert magics.shell.rl_next_input.startswith("%%mcp --code\nfrom servers.calculator")


def test_yes_returns_the_value_and_errors_carry_the_sandbox_traceback(magics: McpMagics) -> None:
    shown = magics.mcp("--yes", "Calculate 6 * 7")
    assert shown._repr_mimebundle_()[0]["text/plain"] == "42"
    with pytest.raises(SandboxCodeError) as info:
        magics.mcp("--code", "x = 1\nraise ValueError('bad value')")
    lines = info.value._render_traceback_()
    assert lines[-1] == "ValueError: bad value" and any("line 2" in line for line in lines)


def test_guardrails_block_before_anything_runs(
    magics: McpMagics, openai_server: ScriptedOpenAI, workspace
) -> None:
    openai_server.add(
        "```python\nimport subprocess\nsubprocess.run(['touch', '/workspace/pwned'])\n```"
    )
    magics.engine.configure(model__base_url=openai_server.base_url, model__api_key="k")
    with pytest.raises(CemcpMessage, match="Guardrails blocked"):
        magics.mcp("--yes", "make a file")
    assert not (workspace / "pwned").exists()


def test_bad_input_gives_usage_errors_not_tracebacks(magics: McpMagics) -> None:
    with pytest.raises(UsageError, match="--timeout"):
        magics.mcp("--timeout soon", "Calculate 1 + 1")
    with pytest.raises(UsageError, match="unrecognized"):
        magics.mcp("--frobnicate", "Calculate 1 + 1")
    with pytest.raises(CemcpMessage, match="empty"):
        magics.mcp("--yes", "   ")
    with pytest.raises(CemcpMessage, match=r"sandbox\.timeout"):
        magics.mcp_config("sandbox.timeout=-1")


def test_config_changes_apply_to_later_cells(magics: McpMagics) -> None:
    shown = magics.mcp_config("sandbox.timeout=1")._repr_mimebundle_()
    assert "sandbox.timeout = 1.0" in shown["text/plain"]
    with pytest.raises(SandboxCodeError, match="longer than 1 s"):
        magics.mcp("--code", "import time\ntime.sleep(5)")


def test_review_streams_regenerates_and_runs_edited_code(
    magics: McpMagics, openai_server: ScriptedOpenAI
) -> None:
    first = "```python\nfrom servers.calculator.add import add\n\nadd(1, 2)\n```"
    second = "```python\nfrom servers.calculator.add import add\n\nadd(2, 3)\n```"
    openai_server.add(first, second)
    magics.engine.configure(model__base_url=openai_server.base_url, model__api_key="k")
    magics.mcp("-o answer", "add two numbers")
    review = magics.last_review
    assert review is not None and review.plan is not None
    assert "".join(review.progress._streamed) == first  # the reply arrived token by token
    assert "add(1, 2)" in review.code and "Tokens:" in review.info.value
    assert "calculator.add" in review.info.value
    review.regenerate()
    assert "add(2, 3)" in review.code
    assert openai_server.requests[-1].body["stream"] is True
    review.edit()
    review.editor.value = "from servers.calculator.add import add\n\nadd(10, 20)\n"
    review.run()
    assert magics.shell.user_ns["answer"] == 30
    assert review.run_button.disabled and review.state == "done"
