"""Removes one microsandbox VM when the process that started it goes away without doing so.

microVMs are started detached (their own session) so that Jupyter's SIGINT to the kernel's
process group cannot kill them; that also means they outlive a kernel that is killed. This
helper, started in its own session beside each VM, holds a pipe from its owner: ``done`` on it
means the owner cleaned up; end of file without it means the owner died, and the helper kills
and removes the VM and deletes the VM's staging folder.

Run as a script (``python -I msb_reaper.py``): it must not import cemcp or read settings, and the
only secret it may hold (a remote service's API key) arrives on the pipe, never in argv or env.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from typing import Any


async def reap(config: dict[str, Any]) -> None:
    import microsandbox as msb

    if config.get("api_key"):
        scope = msb.backend_scope(
            msb.BackendKind.CLOUD, url=config.get("url"), api_key=config["api_key"]
        )
    else:
        scope = msb.backend_scope(msb.BackendKind.LOCAL)
    with scope:
        for _ in range(80):  # about 20 s: the runtime may still be stopping a VM that failed
            try:
                handle = await msb.Sandbox.get(config["name"])
            except msb.MicrosandboxError:  # never created, or already removed
                return
            try:
                if str(handle.status) not in ("stopped", "crashed"):
                    await handle.kill(timeout=10)
                await handle.remove()
                return
            except msb.MicrosandboxError:
                await asyncio.sleep(0.25)


def main() -> None:
    config = json.loads(sys.stdin.readline() or "{}")
    rest = sys.stdin.read()  # until the owner says done, closes the pipe, or dies
    if rest.startswith("done"):
        return
    if config.get("staging"):
        shutil.rmtree(config["staging"], ignore_errors=True)
    if config.get("name"):
        asyncio.run(reap(config))


if __name__ == "__main__":
    main()
