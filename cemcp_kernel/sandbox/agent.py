"""The agent inside every sandbox: a persistent interpreter behind a framed JSON channel.

Standard library only and Python >= 3.8, because it runs on whatever interpreter the sandbox has.
Inside the sandbox it is importable as ``cemcp_sandbox``: tool wrappers call
``from cemcp_sandbox import call_tool`` and the call travels to the host over the same channel.

Frames are a 4-byte big-endian length and a UTF-8 JSON object, on the stdin/stdout the agent
inherited; the agent moves those to private descriptors at start so that code it runs can print
(captured) or read stdin (empty) without touching the channel.

host -> agent  {"type": "exec", "id", "code"} | {"type": "ping", "id"}
               {"type": "interrupt", "id"} | {"type": "tool_result", "id", "ok", "value" | "error"}
agent -> host  {"type": "ready", ...} | {"type": "pong", "id", "busy"}
               {"type": "stream", "id", "name", "text"} | {"type": "result", "id", ...}
               {"type": "call_tool", "id", "server", "tool", "arguments", "timeout"}
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import base64
import builtins
import io
import itertools
import json
import linecache
import os
import signal
import struct
import sys
import threading
import time
import traceback
from typing import Any

MAX_FRAME = 64 * 1024 * 1024
HEADER = struct.Struct(">I")
JSON_VALUE_LIMIT = 2_000_000
REPR_LIMIT = 4000
TABLE_ROWS = 1000  # rows of a table sent to the host; the rest stays in the sandbox


class ToolError(Exception):
    """A tool call failed: the server reported an error, or the call could not be made."""

    def __init__(self, message: str, server: str = "", tool: str = "") -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


class _Channel:
    """Framed JSON over two private descriptors; writes are serialised by a lock."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        self._in = os.fdopen(fd_in, "rb", buffering=0)
        self._out = fd_out
        self._lock = threading.Lock()
        self.pid = os.getpid()

    def send(self, message: dict[str, Any]) -> None:
        if os.getpid() != self.pid:
            return  # a process forked by user code must not speak for the agent
        body = json.dumps(message, ensure_ascii=False, default=str).encode("utf-8")
        frame = HEADER.pack(len(body)) + body
        with self._lock:
            view = memoryview(frame)
            while view:
                written = os.write(self._out, view)
                view = view[written:]

    def receive(self) -> dict[str, Any] | None:
        header = self._read_exact(HEADER.size)
        if header is None:
            return None
        (size,) = HEADER.unpack(header)
        if size > MAX_FRAME:
            raise ValueError("frame too large")
        body = self._read_exact(size)
        return None if body is None else json.loads(body)

    def _read_exact(self, size: int) -> bytes | None:
        chunks = []
        while size:
            chunk = self._in.read(size)
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


class _Execution:
    """Output of the execution under way, capped, flushed to the host as stream frames."""

    def __init__(self, exec_id: int, max_output: int) -> None:
        self.id = exec_id
        self.max_output = max_output
        self.used = 0
        self.dropped = 0
        self.pending: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def write(self, name: str, text: str) -> None:
        with self.lock:
            room = self.max_output - self.used
            if room <= 0:
                self.dropped += len(text)
                return
            if len(text) > room:
                self.dropped += len(text) - room
                text = text[:room]
            self.used += len(text)
            if self.pending and self.pending[-1][0] == name:
                self.pending[-1] = (name, self.pending[-1][1] + text)
            else:
                self.pending.append((name, text))

    def take(self) -> list[tuple[str, str]]:
        with self.lock:
            pending, self.pending = self.pending, []
            return pending


class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr inside the sandbox: text goes to the current execution."""

    def __init__(self, agent: Agent, name: str) -> None:
        self._agent = agent
        self.name = name

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        execution = self._agent.current
        if execution is not None:
            execution.write(self.name, str(text))
        return len(text)

    def isatty(self) -> bool:
        return False


class Agent:
    """Runs exec requests one at a time on the main thread; answers pings and tool results at once."""

    def __init__(self, channel: _Channel, max_output: int) -> None:
        self.channel = channel
        self.max_output = max_output
        self.current: _Execution | None = None
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        self.main_thread = threading.get_ident()
        self._requests: list[dict[str, Any]] = []
        self._wakeup = threading.Condition()
        self._tool_ids = itertools.count(1)
        self._tool_waiters: dict[int, list[Any]] = {}
        self._tool_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cells = itertools.count(1)
        self._flush_lock = threading.RLock()
        self._baseline = _live_pids()

    # --- threads -------------------------------------------------------------------------------

    def reader(self) -> None:
        """Reads frames until the host goes away, then ends the whole process."""
        try:
            while True:
                message = self.channel.receive()
                if message is None:
                    break
                self._dispatch(message)
        except Exception:  # a broken channel cannot be reported over itself
            pass
        os._exit(0)

    def flusher(self) -> None:
        while True:
            time.sleep(0.05)
            self._flush()

    def _flush(self, execution: _Execution | None = None) -> None:
        # One lock keeps every stream frame of an execution ahead of its result frame.
        with self._flush_lock:
            execution = execution or self.current
            if execution is None:
                return
            for name, text in execution.take():
                message = {"type": "stream", "id": execution.id, "name": name, "text": text}
                self.channel.send(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "ping":
            busy = self.current is not None
            self.channel.send({"type": "pong", "id": message.get("id"), "busy": busy})
        elif kind == "interrupt":
            execution = self.current
            if execution is not None and execution.id == message.get("id"):
                signal.pthread_kill(self.main_thread, signal.SIGINT)
        elif kind == "tool_result":
            with self._tool_lock:
                waiter = self._tool_waiters.get(message.get("id"))  # type: ignore[arg-type]
            if waiter is not None:
                waiter[1] = message
                waiter[0].set()
        elif kind == "exec":
            with self._wakeup:
                self._requests.append(message)
                self._wakeup.notify()

    # --- main thread ---------------------------------------------------------------------------

    def serve(self) -> None:
        signal.signal(signal.SIGINT, self._on_sigint)
        while True:
            with self._wakeup:
                while not self._requests:
                    self._wakeup.wait()
                request = self._requests.pop(0)
            try:
                self._execute(request)
            except KeyboardInterrupt:  # an interrupt that arrived just after the code finished
                pass

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.current is not None:
            raise KeyboardInterrupt

    def _execute(self, request: dict[str, Any]) -> None:
        execution = _Execution(int(request["id"]), int(request.get("max_output", self.max_output)))
        result: dict[str, Any] = {"type": "result", "id": execution.id}
        started = time.perf_counter()
        self.current = execution
        value = None
        try:
            value = self._run(str(request.get("code", "")))
            if value is not None:
                result["value"] = describe(value)
                self.namespace["_"] = value
        except BaseException as exc:  # everything user code raises is a result
            result["error"] = describe_error(exc)
        finally:
            self.current = None
        figures = _new_figures(shown=value)
        if figures:
            result["images"] = figures
        if os.getpid() != self.channel.pid:
            os._exit(0)  # user code forked and the child fell through to here: it ends now
        result["duration_ms"] = (time.perf_counter() - started) * 1000
        strays = _live_pids() - self._baseline - {os.getpid()}
        if strays:
            result["strays"] = len(strays)
        if execution.dropped:
            result["truncated"] = execution.dropped
        with self._flush_lock:
            self._flush(execution)
            self.channel.send(result)

    def _run(self, code: str) -> Any:
        filename = f"<cell {next(self._cells)}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(code, filename, "exec", flags | ast.PyCF_ONLY_AST, dont_inherit=True)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        self._eval(compile(tree, filename, "exec", flags, dont_inherit=True))
        if last is None:
            return None
        return self._eval(compile(last, filename, "eval", flags, dont_inherit=True))

    def _eval(self, code: Any) -> Any:
        result = eval(code, self.namespace)
        if code.co_flags & 0x80:  # CO_COROUTINE: the cell used top-level await
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
            try:
                result = self._loop.run_until_complete(result)
            except BaseException:
                self._loop.close()
                self._loop = None
                raise
        return result

    # --- tools ---------------------------------------------------------------------------------

    def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], timeout: float | None
    ) -> Any:
        call_id = next(self._tool_ids)
        waiter: list[Any] = [threading.Event(), None]
        with self._tool_lock:
            self._tool_waiters[call_id] = waiter
        try:
            self.channel.send(
                {
                    "type": "call_tool",
                    "id": call_id,
                    "server": server,
                    "tool": tool,
                    "arguments": arguments,
                    "timeout": timeout,
                }
            )
            if not waiter[0].wait(None if timeout is None else timeout + 5):
                raise ToolError(f"{server}.{tool}: no answer from the host", server, tool)
        finally:
            with self._tool_lock:
                self._tool_waiters.pop(call_id, None)
        reply = waiter[1]
        if not reply.get("ok"):
            raise ToolError(str(reply.get("error", "tool call failed")), server, tool)
        return reply.get("value")


def describe(value: Any) -> dict[str, Any]:
    """A value as the host can render it: a table for records and DataFrames (the first rows
    only, with the total), a PNG for images, JSON for other plain data, always a bounded repr."""
    kind = type(value)
    out: dict[str, Any] = {"type": f"{kind.__module__}.{kind.__qualname__}"}
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<unrepresentable {out['type']}: {exc}>"
    out["repr"] = text if len(text) <= REPR_LIMIT else text[:REPR_LIMIT] + "…"
    table = _table(value)
    if table is not None:
        out["table"] = table
        return out
    png = _png(value)
    if png is not None:
        out["png"] = png
        return out
    if _is_plain(value, 0):
        try:
            encoded = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            encoded = ""
        if encoded and len(encoded) <= JSON_VALUE_LIMIT:
            out["data"] = value
    return out


def _table(value: Any) -> dict[str, Any] | None:
    """Columns, the first TABLE_ROWS rows as lists, and the total row count."""
    module = type(value).__module__.split(".")[0]
    if module == "pandas" and hasattr(value, "to_frame") and not hasattr(value, "columns"):
        value = value.to_frame()  # a Series
    if module == "pandas" and hasattr(value, "columns") and hasattr(value, "to_json"):
        head = value.head(TABLE_ROWS)
        if not _plain_index(head):
            head = head.reset_index()
        split = json.loads(head.to_json(orient="split", date_format="iso", default_handler=str))
        columns = [str(c) for c in split["columns"]]
        return {"columns": columns, "rows": split["data"], "total": len(value)}
    if (
        isinstance(value, list)
        and value
        and all(isinstance(row, dict) for row in value[:TABLE_ROWS])
        and _is_plain(value[:TABLE_ROWS], 0)
    ):
        columns: list[str] = []
        for row in value[:TABLE_ROWS]:
            columns += [str(c) for c in row if str(c) not in columns]
        rows = [[row.get(c) for c in columns] for row in value[:TABLE_ROWS]]
        return {"columns": columns, "rows": rows, "total": len(value)}
    return None


def _plain_index(frame: Any) -> bool:
    index = frame.index
    return type(index).__name__ == "RangeIndex" and index.start == 0 and index.step == 1


def _png(value: Any) -> str | None:
    """Base64 PNG of an image-like value (matplotlib figures, anything with _repr_png_)."""
    data = None
    if type(value).__module__.startswith("matplotlib") and hasattr(value, "savefig"):
        data = _figure_png(value)
    elif hasattr(value, "_repr_png_") and not isinstance(value, type):
        try:
            data = value._repr_png_()
        except Exception:
            data = None
    return base64.b64encode(data).decode("ascii") if isinstance(data, bytes) else None


def _figure_png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def _new_figures(shown: Any) -> list[str]:
    """Figures the cell drew with pyplot, as PNGs (then closed, as an inline backend does);
    ``shown`` is the cell's value, already sent as an image if it is a figure."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    images = []
    for number in pyplot.get_fignums():
        figure = pyplot.figure(number)
        if figure is shown or getattr(shown, "figure", None) is figure:
            continue
        try:
            images.append(base64.b64encode(_figure_png(figure)).decode("ascii"))
        except Exception:
            continue
    pyplot.close("all")
    return images


def _is_plain(value: Any, depth: int) -> bool:
    if depth > 20:
        return False
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v, depth + 1) for k, v in value.items())
    return False


def describe_error(exc: BaseException) -> dict[str, Any]:
    """The exception with a traceback of the user's code only (agent frames removed)."""
    here = os.path.abspath(__file__)
    report = traceback.TracebackException.from_exception(exc)
    frames = [f for f in report.stack if os.path.abspath(f.filename) != here]
    report.stack = traceback.StackSummary.from_list(frames)
    error: dict[str, Any] = {
        "ename": type(exc).__name__,
        "evalue": str(exc),
        "traceback": "".join(report.format()),
    }
    if isinstance(exc, SyntaxError):
        error["lineno"] = exc.lineno
    else:
        cells = [f for f in frames if f.filename.startswith("<cell ")]
        if cells:
            error["lineno"] = cells[-1].lineno
    return error


_agent: Agent | None = None


def call_tool(
    server: str, tool: str, arguments: dict[str, Any] | None = None, timeout: float | None = None
) -> Any:
    """Call a tool of a live MCP server; the host makes the call, this process never does."""
    if _agent is None:
        raise ToolError("call_tool works only inside a cemcp sandbox", server, tool)
    return _agent.call_tool(server, tool, dict(arguments or {}), timeout)


def _live_pids() -> set[int]:
    """Processes this agent can see that are not zombies: its own and those user code started."""
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            pids.add(int(entry))
    return pids


def _set_limits(memory_mb: int, max_processes: int, max_file_mb: int) -> None:
    import resource

    limits = [
        (resource.RLIMIT_AS, memory_mb * 1024 * 1024),
        (resource.RLIMIT_NPROC, max_processes),
        (resource.RLIMIT_FSIZE, max_file_mb * 1024 * 1024),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in limits:
        if value > 0:
            try:
                resource.setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="cemcp_sandbox")
    parser.add_argument("--max-output", type=int, default=1_000_000)
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--max-processes", type=int, default=0)
    parser.add_argument("--max-file-mb", type=int, default=0)
    parser.add_argument("--path", action="append", default=[])
    args = parser.parse_args(argv)

    global _agent
    # Tool wrappers import this file as cemcp_sandbox: make that the running module, not a copy.
    sys.modules["cemcp_sandbox"] = sys.modules[__name__]
    for entry in reversed(args.path):
        sys.path.insert(0, entry)

    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    channel = _Channel(proto_in, proto_out)
    agent = Agent(channel, args.max_output)
    _agent = agent
    for fd, name in ((1, "stdout"), (2, "stderr")):
        read_end, write_end = os.pipe()
        os.dup2(write_end, fd)
        os.close(write_end)
        threading.Thread(target=_pump, args=(agent, read_end, name), daemon=True).start()
    sys.stdout = _Stream(agent, "stdout")
    sys.stderr = _Stream(agent, "stderr")
    sys.stdin = io.StringIO()

    _set_limits(args.memory_mb, args.max_processes, args.max_file_mb)
    threading.Thread(target=agent.reader, daemon=True).start()
    threading.Thread(target=agent.flusher, daemon=True).start()
    channel.send(
        {
            "type": "ready",
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "executable": sys.executable,
        }
    )
    agent.serve()


def _pump(agent: Agent, fd: int, name: str) -> None:
    """Output written to the file descriptors directly (C code, child processes) is captured too."""
    while True:
        data = os.read(fd, 65536)
        if not data:
            return
        execution = agent.current
        if execution is not None:
            execution.write(name, data.decode("utf-8", "replace"))


if __name__ == "__main__":
    main()
