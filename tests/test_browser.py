"""A real browser: JupyterLab on 127.0.0.1, Debian's Chromium driven headless by Playwright.

Open a notebook on the cemcp kernel, run a ``%%mcp`` cell, see the review widget, click Run,
see the result table. Screenshots of each step are kept in ``test-artifacts/browser/``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = ROOT / "test-artifacts" / "browser"
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium executable (Debian: apt install chromium)"
    ),
]
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": "%%mcp\nlist the available tools",
        }
    ],
    "metadata": {
        "kernelspec": {"name": "cemcp", "display_name": "Python 3 (cemcp)", "language": "python"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def lab(tmp_path: Path, installed_kernelspec: str, workspace: Path) -> Iterator[str]:
    """A JupyterLab server on 127.0.0.1; yields the URL of the demo notebook."""
    root = tmp_path / "lab"
    root.mkdir()
    (root / "demo.ipynb").write_text(json.dumps(NOTEBOOK))
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))},
        "CEMCP_PROJECT_DIR": str(ROOT),
        "CEMCP_WORKSPACE_DIR": str(workspace),
        "CEMCP_SANDBOX__POOL_SIZE": "1",
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
    }
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--ServerApp.port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.getuid() == 0:
        command.append("--allow-root")
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError((tmp_path / "lab.log").read_text()[-3000:]) from None
                time.sleep(0.25)
        yield f"{base}/lab/tree/demo.ipynb?token={token}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def run_first_cell(page: object) -> None:
    """Shift+Enter in the first cell, again until its prompt shows it was accepted: JupyterLab
    reports the kernel idle a moment before its session takes execute requests."""
    prompt = page.locator(".jp-Notebook .jp-Cell .jp-InputPrompt").first  # type: ignore[attr-defined]
    for _ in range(12):
        page.click(".jp-Notebook .jp-Cell .cm-content")  # type: ignore[attr-defined]
        page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if prompt.inner_text().strip() != "[ ]:":
                return
            time.sleep(0.1)
    raise AssertionError("JupyterLab never ran the cell")


def test_review_and_run_a_cell_in_jupyterlab(lab: str) -> None:
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            page.goto(lab)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            # The kernel is the notebook's own: cemcp, and idle before the cell runs.
            page.wait_for_selector(
                ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000
            )
            page.screenshot(path=ARTIFACTS / "1-notebook-open.png")

            run_first_cell(page)
            run = page.locator(".jp-OutputArea .widget-button", has_text="Run")
            run.wait_for(timeout=60_000)
            review = page.locator(".jp-OutputArea", has_text="Review the code before it runs")
            assert "tools = [" in review.inner_text()
            page.screenshot(path=ARTIFACTS / "2-review-widget.png")

            run.click()
            table = page.locator(".jp-OutputArea table.cemcp-table")
            table.wait_for(timeout=60_000)
            text = table.inner_text()
            assert "calculator.add" in text and "calculator.multiply" in text
            assert run.is_disabled()
            page.screenshot(path=ARTIFACTS / "3-result-table.png", full_page=True)
        except Exception:
            page.screenshot(path=ARTIFACTS / "failure.png", full_page=True)
            raise
        finally:
            browser.close()
