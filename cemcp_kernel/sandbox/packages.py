"""Third-party packages for code in the sandbox, kept apart from the host's environment.

The sandbox sees no site-packages of the host. Packages the generated code may import (pandas,
matplotlib...) are listed in ``sandbox.packages`` and installed once, for the interpreter the
sandbox runs, into a folder of this Python environment (``<prefix>/share/cemcp/sandbox-site``)
that the sandbox mounts read-only.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from ..config import Settings
from ..errors import SandboxError

_MARKER = ".cemcp-complete"


def site_dir(settings: Settings) -> Path | None:
    """The folder for this package list and interpreter, or None when no packages are wanted."""
    packages = sorted(settings.sandbox.packages)
    if not packages:
        return None
    version = f"py{sys.version_info.major}{sys.version_info.minor}"
    digest = hashlib.sha256("\n".join(packages).encode()).hexdigest()[:12]
    return Path(sys.prefix) / "share" / "cemcp" / "sandbox-site" / f"{version}-{digest}"


def missing(settings: Settings) -> list[str]:
    """The configured packages when their folder is not installed yet, else []."""
    folder = site_dir(settings)
    if folder is None or (folder / _MARKER).exists():
        return []
    return sorted(settings.sandbox.packages)


def install(settings: Settings) -> Path | None:
    """pip-install the configured packages into their folder (idempotent)."""
    folder = site_dir(settings)
    if folder is None or not missing(settings):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--upgrade",
        "--target",
        str(folder),
    ]
    done = subprocess.run([*command, *settings.sandbox.packages], check=False)
    if done.returncode != 0:
        raise SandboxError(
            f"Installing the sandbox packages ({', '.join(settings.sandbox.packages)}) failed; "
            "see pip's output above."
        )
    (folder / _MARKER).write_text("\n".join(sorted(settings.sandbox.packages)) + "\n")
    return folder
