"""The cemcp kernel: IPython's kernel with the ``magics`` extension loaded at start.

Loading the extension starts the engine, whose sandbox pool warms up on the engine's own
thread, so ``kernel_info_reply`` is not delayed by sandbox start-up.
"""

from __future__ import annotations

from typing import Any

from ipykernel.ipkernel import IPythonKernel

from . import __version__


class CemcpKernel(IPythonKernel):
    implementation = "cemcp"
    implementation_version = __version__
    banner = (
        "cemcp: Python with %%mcp cells. Write a request under %%mcp; the code runs in a sandbox.\n"
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shell.extension_manager.load_extension("magics")

    def do_shutdown(self, restart: bool) -> Any:
        self.shell.extension_manager.unload_extension("magics")
        return super().do_shutdown(restart)


def main() -> None:
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(kernel_class=CemcpKernel)


if __name__ == "__main__":
    main()
