"""The sandbox protocol every backend implements, and the agent-driving logic they share.

A backend only knows how to start the agent inside its isolation and move bytes; time limits,
interrupts and the translation of failures into results live here, once for all backends.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from abc import ABC, abstractmethod
from typing import Protocol

from ..config import SandboxSettings, Settings
from ..errors import SandboxError
from .channel import AgentChannel, StreamCallback, ToolHandler
from .results import ErrorInfo, ExecutionResult

INTERRUPT_GRACE_S = 1.0
# The whole environment of the agent in every backend: nothing of the host's.
AGENT_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "MPLBACKEND": "Agg",
    # One thread per numeric library: thread pools sized to the host's cores would exhaust the
    # sandbox's process limit on a large machine.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
READY_TIMEOUT_S = 30.0


class Sandbox(Protocol):
    """What the pool and the engine use; nothing else of a backend leaks out."""

    id: str
    backend: str
    isolation: str

    @property
    def alive(self) -> bool: ...

    async def start(self) -> None: ...

    async def ping(self, timeout: float = 2.0) -> bool: ...

    async def execute(
        self, code: str, *, timeout: float | None = None, on_stream: StreamCallback | None = None
    ) -> ExecutionResult: ...

    async def interrupt(self) -> None: ...

    async def close(self) -> None: ...


class AgentSandbox(ABC):
    """Runs the agent protocol over whatever transport a subclass launches."""

    backend = "abstract"
    isolation = "none"

    def __init__(self, limits: SandboxSettings, tool_handler: ToolHandler | None = None) -> None:
        self.id = f"{self.backend}-{uuid.uuid4().hex[:8]}"
        self.limits = limits
        self.tool_handler = tool_handler
        self.channel: AgentChannel | None = None
        self._running: int | None = None
        self._interrupted = False

    # --- subclass hooks ------------------------------------------------------------------------

    @classmethod
    async def preflight(cls, settings: Settings) -> None:
        """Cheap checks a probe runs before booting anything; raise SandboxUnavailable with the
        reason, so that a backend that cannot work here is refused at once."""
        return None

    @abstractmethod
    async def _launch(self, channel_factory: type[AgentChannel]) -> AgentChannel:
        """Start the agent and return a channel wired to it."""

    @abstractmethod
    async def _terminate(self) -> None:
        """Stop everything the backend started; must be safe to call twice."""

    def agent_args(self) -> list[str]:
        limits = self.limits
        return [
            "--max-output",
            str(limits.max_output_bytes),
            "--memory-mb",
            str(limits.memory_mb),
            "--max-processes",
            str(limits.max_processes),
            "--max-file-mb",
            "1024",
        ]

    # --- protocol ------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.channel is not None and self.channel.closed is None

    async def start(self) -> None:
        try:
            self.channel = await self._launch(AgentChannel)
            await asyncio.wait_for(asyncio.shield(self.channel.ready), READY_TIMEOUT_S)
        except asyncio.TimeoutError:
            await self.close()
            raise SandboxError(
                f"{self.backend}: the agent did not start within {READY_TIMEOUT_S:g} s"
            ) from None
        except SandboxError as exc:
            await self.close()
            raise SandboxError(f"{self.backend}: the sandbox did not start. {exc}") from None
        except BaseException:  # cancelled while starting: leave no process behind
            await self.close()
            raise

    async def ping(self, timeout: float = 2.0) -> bool:
        if not self.alive or self.channel is None:
            return False
        try:
            return await asyncio.wait_for(self.channel.ping(), timeout)
        except (asyncio.TimeoutError, SandboxError):
            return False

    async def execute(
        self, code: str, *, timeout: float | None = None, on_stream: StreamCallback | None = None
    ) -> ExecutionResult:
        timeout = self.limits.timeout if timeout is None else timeout
        channel = self.channel
        if channel is None or not self.alive:
            return self._failure("sandbox", "SandboxError", "The sandbox is not running.")
        started = time.perf_counter()
        self._interrupted = False
        try:
            exec_id, future = await channel.start_execution(
                code, self.limits.max_output_bytes, on_stream
            )
        except SandboxError as exc:
            return self._failure("sandbox", "SandboxError", str(exc))
        self._running = exec_id
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            timed_out = True
            await self._stop(exec_id)
        except SandboxError:
            pass
        finally:
            self._running = None
        stdout, stderr = channel.partial_output(exec_id)
        result = channel.finish_execution(exec_id)
        if result is None:
            result = ExecutionResult(stdout=stdout, stderr=stderr)
            result.error = ErrorInfo(
                kind="sandbox",
                ename="SandboxError",
                evalue=f"The sandbox stopped while running the code ({channel.closed}).",
            )
        result.error = self._classify(result, timed_out, timeout)
        result.duration_ms = (time.perf_counter() - started) * 1000
        result.sandbox = self.id
        return result

    def _classify(
        self, result: ExecutionResult, timed_out: bool, timeout: float
    ) -> ErrorInfo | None:
        """Say which limit or event ended the code, in words a user can act on."""
        error = result.error
        if timed_out:
            return ErrorInfo(
                kind="timeout",
                ename="TimeoutError",
                evalue=f"The code ran longer than {timeout:g} s and was stopped. "
                "Give it more time with --timeout SECONDS.",
            )
        if error is None:
            return None
        if self._interrupted:
            if error.kind == "sandbox":
                error.evalue = (
                    f"The code did not stop within {INTERRUPT_GRACE_S:g} s of the interrupt, "
                    "so its sandbox was stopped."
                )
            error.kind = "interrupted"
        elif error.ename == "MemoryError" or self.memory_exceeded():
            error.kind = "limit"
            error.evalue = (
                f"The code needed more than the sandbox's {self.limits.memory_mb} MiB of memory."
            )
        elif result.strays and _out_of_processes(error):
            error.kind = "limit"
            error.evalue = (
                f"The code tried to start more than the sandbox's {self.limits.max_processes} "
                "processes."
            )
        return error

    def memory_exceeded(self) -> bool:
        """True when the backend saw the memory limit kill a process (backends that can tell)."""
        return False

    async def interrupt(self) -> None:
        """Stop the code under way: KeyboardInterrupt inside, or the sandbox killed after a grace."""
        if self._running is not None:
            self._interrupted = True
            await self._stop(self._running)

    async def _stop(self, exec_id: int) -> None:
        channel = self.channel
        if channel is None:
            return
        future = channel.result_future(exec_id)
        try:
            await channel.interrupt(exec_id)
            if future is not None:
                await asyncio.wait_for(asyncio.shield(future), INTERRUPT_GRACE_S)
        except (asyncio.TimeoutError, SandboxError):
            await self.close()

    async def close(self) -> None:
        if self.channel is not None:
            self.channel.close("closed by cemcp")
        await self._terminate()

    def _failure(self, kind: str, ename: str, message: str) -> ExecutionResult:
        return ExecutionResult(
            error=ErrorInfo(kind=kind, ename=ename, evalue=message),  # type: ignore[arg-type]
            sandbox=self.id,
        )


def _out_of_processes(error: ErrorInfo) -> bool:
    return (
        error.ename in ("BlockingIOError", "OSError") and "temporarily unavailable" in error.evalue
    )
