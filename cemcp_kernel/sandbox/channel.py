"""The host's end of the agent protocol, independent of how bytes reach the sandbox.

A backend feeds every byte it reads from the agent into :meth:`AgentChannel.feed` and gives the
channel a coroutine that writes bytes to the agent. Anything that is not a well-formed frame marks
the channel broken: code inside the sandbox can write to the channel's descriptor, so the host
treats the channel as untrusted input and never lets it raise into the kernel.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import SandboxError
from .results import ExecutionResult, ToolCallRecord

HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024

Writer = Callable[[bytes], Awaitable[None]]
StreamCallback = Callable[[str, str], None]
ToolHandler = Callable[[str, str, dict[str, Any], float | None], Awaitable[Any]]


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return HEADER.pack(len(body)) + body


class _Pending:
    """An execution under way: its output so far and the future of its result frame."""

    def __init__(self, on_stream: StreamCallback | None) -> None:
        self.future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.on_stream = on_stream
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.tool_calls: list[ToolCallRecord] = []

    def stream(self, name: str, text: str) -> None:
        (self.stderr if name == "stderr" else self.stdout).append(text)
        if self.on_stream is not None:
            self.on_stream(name, text)


class AgentChannel:
    def __init__(self, write: Writer, tool_handler: ToolHandler | None = None) -> None:
        self._write = write
        self._tool_handler = tool_handler
        self._buffer = bytearray()
        self._ids = itertools.count(1)
        self._executions: dict[int, _Pending] = {}
        self._pings: dict[int, asyncio.Future[bool]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.closed: str | None = None

    # --- bytes in ------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        if self.closed:
            return
        self._buffer += data
        while len(self._buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buffer)
            if size > MAX_FRAME:
                self.close("the sandbox sent an oversized frame on the agent channel")
                return
            if len(self._buffer) < HEADER.size + size:
                return
            body = bytes(self._buffer[HEADER.size : HEADER.size + size])
            del self._buffer[: HEADER.size + size]
            try:
                message = json.loads(body)
                if not isinstance(message, dict):
                    raise ValueError("not an object")
                self._dispatch(message)
            except (ValueError, TypeError, KeyError) as exc:
                self.close(f"the sandbox sent garbage on the agent channel ({exc})")
                return

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "ready":
            if not self.ready.done():
                self.ready.set_result(message)
        elif kind == "pong":
            future = self._pings.pop(int(message["id"]), None)
            if future is not None and not future.done():
                future.set_result(not message.get("busy"))
        elif kind == "stream":
            pending = self._executions.get(int(message["id"]))
            if pending is not None:
                pending.stream(str(message["name"]), str(message["text"]))
        elif kind == "result":
            pending = self._executions.get(int(message["id"]))
            if pending is not None and not pending.future.done():
                pending.future.set_result(message)
        elif kind == "call_tool":
            task = asyncio.get_running_loop().create_task(self._call_tool(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            raise ValueError(f"unknown message type {kind!r}")

    async def _call_tool(self, message: dict[str, Any]) -> None:
        server, tool = str(message.get("server")), str(message.get("tool"))
        arguments = message.get("arguments") or {}
        timeout = message.get("timeout")
        started = time.perf_counter()
        reply: dict[str, Any] = {"type": "tool_result", "id": message.get("id")}
        try:
            if self._tool_handler is None:
                raise SandboxError("this sandbox has no MCP bridge")
            if not isinstance(arguments, dict):
                raise SandboxError("tool arguments must be a JSON object")
            reply["value"] = await self._tool_handler(server, tool, arguments, timeout)
            reply["ok"] = True
        except Exception as exc:  # every failure goes back to the sandbox as a ToolError
            reply["ok"] = False
            reply["error"] = str(exc) or type(exc).__name__
        record = ToolCallRecord(
            server=server,
            tool=tool,
            ok=reply["ok"],
            duration_ms=(time.perf_counter() - started) * 1000,
            error=reply.get("error"),
        )
        for pending in self._executions.values():
            pending.tool_calls.append(record)
        try:
            await self._send(reply)
        except SandboxError:
            pass

    # --- requests ------------------------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        if self.closed:
            raise SandboxError(f"The sandbox is gone: {self.closed}")
        try:
            await self._write(encode(message))
        except (OSError, RuntimeError) as exc:
            self.close(f"cannot write to the sandbox ({exc})")
            raise SandboxError(f"The sandbox is gone: {self.closed}") from None

    async def ping(self) -> bool:
        """True when the agent answers and is idle. Callers bound the wait."""
        ping_id = next(self._ids)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pings[ping_id] = future
        try:
            await self._send({"type": "ping", "id": ping_id})
            return await future
        finally:
            self._pings.pop(ping_id, None)

    async def start_execution(
        self, code: str, max_output: int, on_stream: StreamCallback | None
    ) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        """Send the code; the future resolves with the agent's result frame."""
        exec_id = next(self._ids)
        pending = _Pending(on_stream)
        self._executions[exec_id] = pending
        await self._send({"type": "exec", "id": exec_id, "code": code, "max_output": max_output})
        return exec_id, pending.future

    def result_future(self, exec_id: int) -> asyncio.Future[dict[str, Any]] | None:
        pending = self._executions.get(exec_id)
        return None if pending is None else pending.future

    def finish_execution(self, exec_id: int) -> ExecutionResult | None:
        """The result of a finished execution, or None if it never finished."""
        pending = self._executions.pop(exec_id, None)
        if pending is None or not pending.future.done() or pending.future.cancelled():
            return None
        if pending.future.exception() is not None:
            return None
        try:
            result = ExecutionResult.from_agent(
                pending.future.result(), "".join(pending.stdout), "".join(pending.stderr)
            )
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            # A well-formed frame with a forged body: as untrusted as garbage bytes.
            self.close(f"the sandbox sent a malformed result ({type(exc).__name__})")
            return None
        result.tool_calls = pending.tool_calls
        return result

    def partial_output(self, exec_id: int) -> tuple[str, str]:
        pending = self._executions.get(exec_id)
        if pending is None:
            return "", ""
        return "".join(pending.stdout), "".join(pending.stderr)

    async def interrupt(self, exec_id: int) -> None:
        await self._send({"type": "interrupt", "id": exec_id})

    def close(self, reason: str) -> None:
        """Fail every waiter; the channel accepts nothing more."""
        if self.closed:
            return
        self.closed = reason
        error = SandboxError(f"The sandbox is gone: {reason}")
        futures: list[asyncio.Future[Any]] = [p.future for p in self._executions.values()]
        futures += [*self._pings.values(), self.ready]
        for future in futures:
            if not future.done():
                future.set_exception(error)
                future.exception()  # waiters still see it; nobody waiting is not an error
        for task in self._tasks:
            task.cancel()
