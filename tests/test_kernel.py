"""The installed kernel, driven through jupyter_client: %%mcp cells end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager

from cemcp_kernel.scripted_model import ScriptedOpenAI

from .conftest import SECRET_KEY


def test_kernelspec_is_installed_for_this_interpreter(installed_kernelspec: str) -> None:
    spec = KernelSpecManager().get_kernel_spec("cemcp")
    assert spec.argv[0] == sys.executable
    assert spec.argv[1:3] == ["-m", "cemcp_kernel.kernel"]
    assert "cemcp" in spec.display_name
    folder = Path(installed_kernelspec)
    assert {"logo-32x32.png", "logo-64x64.png", "logo-svg.svg"} <= {
        p.name for p in folder.iterdir()
    }
    assert json.loads((folder / "kernel.json").read_text())["interrupt_mode"] == "signal"


def test_rule_based_request_runs_in_the_sandbox(start_kernel, kernel_env) -> None:
    kernel = start_kernel(kernel_env)
    cell = kernel.run("%%mcp --yes\nCalculate 5 + 3")
    assert cell.status == "ok", cell.text()
    assert cell.results() == ["8"]
    assert "from servers.calculator.calculate import calculate" in cell.text()


def test_workspace_write_reaches_the_host_and_home_is_invisible(
    start_kernel, kernel_env, workspace: Path
) -> None:
    kernel = start_kernel(kernel_env)
    cell = kernel.run("%%mcp --code\nopen('/workspace/note.txt', 'w').write('from the sandbox')")
    assert cell.status == "ok", cell.text()
    assert (workspace / "note.txt").read_text() == "from the sandbox"
    home = Path.home()
    cell = kernel.run(f"%%mcp --code\nimport os\nos.listdir({str(home)!r})")
    assert cell.status == "error"
    assert "FileNotFoundError" in cell.text()
    assert "cemcp_kernel" not in cell.text()  # the sandbox's traceback, not the magic's
    assert kernel.run("%%mcp --code\n2 + 2").results() == ["4"]


def test_model_writes_the_code_and_never_sees_into_the_sandbox(
    start_kernel, kernel_env, openai_server: ScriptedOpenAI
) -> None:
    openai_server.add(
        "Here you go:\n```python\nfrom servers.calculator.multiply import multiply\n\nmultiply(6, 7)\n```"
    )
    env = {**kernel_env, "OPENAI_API_KEY": SECRET_KEY, "OPENAI_BASE_URL": openai_server.base_url}
    kernel = start_kernel(env)
    cell = kernel.run("%%mcp --yes\nUse the calculator to multiply six by seven")
    assert cell.status == "ok", cell.text()
    assert cell.results() == ["42"]
    request = openai_server.requests[0]
    assert request.headers["authorization"] == f"Bearer {SECRET_KEY}"
    prompt = "\n".join(m["content"] for m in request.body["messages"])
    assert "from servers.calculator.multiply import multiply" in prompt
    leak_check = (
        "%%mcp --code\n"
        "import os, glob\n"
        f"key = {SECRET_KEY!r}\n"
        "found = [p for p in glob.glob('/proc/*/environ') if key.encode() in open(p, 'rb').read()]\n"
        "(key in str(os.environ), found)"
    )
    assert kernel.run(leak_check).results() == ["(False, [])"]


def test_unhandled_request_without_model_says_how_to_configure(start_kernel, kernel_env) -> None:
    kernel = start_kernel(kernel_env)
    cell = kernel.run("%%mcp --yes\nSummarise my unread email")
    assert cell.status == "error"
    text = cell.text()
    assert "OPENAI_API_KEY" in text and "%mcp_config" in text
    assert "Traceback" not in text
    assert kernel.run("%%mcp --yes\nCalculate 2 * 21").results() == ["42"]


def test_without_yes_the_code_waits_for_review(start_kernel, kernel_env) -> None:
    kernel = start_kernel(kernel_env)
    cell = kernel.run("%%mcp\nCalculate 1 + 1")
    assert cell.status == "ok"
    assert cell.results() == []
    reviews = [
        o["content"]["data"]
        for o in cell.outputs
        if o["content"].get("data", {}).get("text/plain", "").startswith("Review")
    ]
    assert reviews and all("application/vnd.jupyter.widget-view+json" in d for d in reviews)
    assert "calculate('1 + 1')" in reviews[-1]["text/plain"]


def test_load_ext_gives_the_magics_in_a_plain_ipython_kernel(
    installed_kernelspec: str, kernel_env, tmp_path: Path
) -> None:
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", env=kernel_env, cwd=str(tmp_path))
    try:
        outputs: list[str] = []

        def hook(msg):
            if msg["msg_type"] == "execute_result":
                outputs.append(msg["content"]["data"]["text/plain"])

        client.execute_interactive("%load_ext magics", timeout=60)
        reply = client.execute_interactive(
            "%%mcp --yes\nCalculate 5 + 3", output_hook=hook, timeout=60
        )
        assert reply["content"]["status"] == "ok"
        assert outputs == ["8"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=False)


def test_the_embedding_model_is_not_imported_at_kernel_start(start_kernel, kernel_env) -> None:
    kernel = start_kernel({**kernel_env, "CEMCP_SELECTION__SEMANTIC": "true"})
    cell = kernel.run(
        "import sys, magics\n"
        "magics._magics.engine  # waits for the engine to be built on its start thread\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'numpy')\n"
        "('magics' in get_ipython().extension_manager.loaded,"
        " [m for m in heavy if m in sys.modules])"
    )
    assert cell.status == "ok", cell.text()
    assert cell.results() == ["(True, [])"]  # the engine is up; selection has loaded nothing
