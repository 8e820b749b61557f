"""Installing the ``cemcp`` kernelspec: small pure steps with a thin command line around them."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .paths import data_dir

KERNEL_NAME = "cemcp"


def kernel_dict(executable: str | None = None) -> dict[str, Any]:
    """kernel.json from ``kernelspec/``, launching this (or the given) interpreter."""
    spec = json.loads((data_dir("kernelspec") / "kernel.json").read_text())
    spec["argv"] = [executable or sys.executable, *spec["argv"][1:]]
    return spec


def write_kernel_spec(destination: Path, executable: str | None = None) -> Path:
    """kernel.json and the logos, written into ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    for logo in data_dir("kernelspec").glob("logo-*"):
        shutil.copy(logo, destination / logo.name)
    (destination / "kernel.json").write_text(json.dumps(kernel_dict(executable), indent=2) + "\n")
    return destination


def install(user: bool = False, prefix: str | None = None, name: str = KERNEL_NAME) -> str:
    """Install the spec where Jupyter looks for it; returns the installed folder."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        source = write_kernel_spec(Path(tmp) / name)
        return KernelSpecManager().install_kernel_spec(str(source), name, user=user, prefix=prefix)
