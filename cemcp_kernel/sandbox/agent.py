"""The agent inside every sandbox: a persistent interpreter behind a framed JSON channel.

Standard library only and Python >= 3.8, because it runs on whatever interpreter the sandbox has.
Inside the sandbox it is importable as ``cemcp_sandbox``: tool wrappers call
``from cemcp_sandbox import call_tool`` (or ``call_tool_async``) and the call travels to the host
over the same channel. Arguments are checked against the tool's JSON schema here, before they
leave the sandbox, by a small validator of the JSON Schema keywords tools use.

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
import math
import os
import re
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


class ToolArgumentError(ToolError):
    """The arguments do not match the tool's input schema; the call was not made."""


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
        self._tool_waiters: dict[int, Any] = {}
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
                waiter.deliver(message)
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
        waiter = _ThreadWaiter()
        call_id = self._start_call(waiter, server, tool, arguments, timeout)
        try:
            if not waiter.event.wait(None if timeout is None else timeout + 5):
                raise ToolError(f"{server}.{tool}: no answer from the host", server, tool)
        finally:
            with self._tool_lock:
                self._tool_waiters.pop(call_id, None)
        return _tool_value(waiter.reply, server, tool)

    async def call_tool_async(
        self, server: str, tool: str, arguments: dict[str, Any], timeout: float | None
    ) -> Any:
        waiter = _FutureWaiter(asyncio.get_running_loop())
        call_id = self._start_call(waiter, server, tool, arguments, timeout)
        try:
            if timeout is None:
                reply = await waiter.future
            else:
                try:
                    reply = await asyncio.wait_for(waiter.future, timeout + 5)
                except asyncio.TimeoutError:
                    message = f"{server}.{tool}: no answer from the host"
                    raise ToolError(message, server, tool) from None
        finally:
            with self._tool_lock:
                self._tool_waiters.pop(call_id, None)
        return _tool_value(reply, server, tool)

    def _start_call(
        self,
        waiter: Any,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        timeout: float | None,
    ) -> int:
        call_id = next(self._tool_ids)
        with self._tool_lock:
            self._tool_waiters[call_id] = waiter
        message = {
            "type": "call_tool",
            "id": call_id,
            "server": server,
            "tool": tool,
            "arguments": arguments,
            "timeout": timeout,
        }
        try:
            self.channel.send(message)
        except BaseException:
            with self._tool_lock:
                self._tool_waiters.pop(call_id, None)
            raise
        return call_id


class _ThreadWaiter:
    """A blocking caller's slot for its tool_result frame, filled by the reader thread."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reply: dict[str, Any] = {}

    def deliver(self, message: dict[str, Any]) -> None:
        self.reply = message
        self.event.set()


class _FutureWaiter:
    """An awaiting caller's future, resolved on its own event loop from the reader thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[dict[str, Any]] = loop.create_future()

    def deliver(self, message: dict[str, Any]) -> None:
        try:
            self.loop.call_soon_threadsafe(self._resolve, message)
        except RuntimeError:  # the caller's loop is closed: nobody is waiting any more
            pass

    def _resolve(self, message: dict[str, Any]) -> None:
        if not self.future.done():
            self.future.set_result(message)


def _tool_value(reply: dict[str, Any], server: str, tool: str) -> Any:
    if not reply.get("ok"):
        raise ToolError(str(reply.get("error", "tool call failed")), server, tool)
    return reply.get("value")


# --- arguments -----------------------------------------------------------------------------------

_JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "int or float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


def check_arguments(
    arguments: Any, schema: dict[str, Any] | None, server: str = "", tool: str = ""
) -> dict[str, Any]:
    """The arguments as plain JSON, or ToolArgumentError saying which one is wrong and why."""
    label = f"{server}.{tool}" if server else tool or "tool"
    if not isinstance(arguments, dict):
        raise ToolArgumentError(
            f"{label}: arguments must be a dict, got {type(arguments).__name__}", server, tool
        )
    if schema:
        required = schema.get("required") or []
        arguments = {k: v for k, v in arguments.items() if v is not None or k in required}
    try:
        plain = _plain_json(arguments, "")
    except ValueError as exc:
        raise ToolArgumentError(f"{label}: {exc}", server, tool) from None
    if schema:
        problem = _first_problem(plain, schema, schema, "", 0)
        if problem is not None:
            raise ToolArgumentError(f"{label}: {problem}", server, tool)
    return plain


def _plain_json(value: Any, path: str) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"{_where(path)} is {value}, which JSON cannot carry")
        return value
    if isinstance(value, (list, tuple)):
        return [_plain_json(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{_where(path)} has a key {key!r} that is not a str")
            out[key] = _plain_json(item, f"{path}.{key}" if path else key)
        return out
    raise ValueError(
        f"{_where(path)} is a {type(value).__name__}, which cannot be sent to an MCP server: "
        "pass str, int, float, bool, None, list or dict (e.g. a date as .isoformat())"
    )


def _where(path: str) -> str:
    return f"argument {path!r}" if path else "the arguments"


def _first_problem(
    value: Any, schema: Any, root: dict[str, Any], path: str, depth: int
) -> str | None:
    """The first way ``value`` breaks ``schema`` (JSON Schema keywords tools use), or None."""
    if schema is False:
        return f"{_where(path)} is not allowed"
    if depth > 64 or not isinstance(schema, dict):
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = resolve_ref(root, ref)
        if target is not None:
            problem = _first_problem(value, target, root, path, depth + 1)
            if problem is not None:
                return problem
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if names and not any(_is_type(value, name) for name in names):
            wanted = " or ".join(_JSON_TYPES.get(n, n) for n in names)
            return f"{_where(path)} must be {wanted}, got {_describe_value(value)}"
    if "enum" in schema and not any(_json_equal(value, e) for e in schema["enum"] or []):
        choices = ", ".join(repr(e) for e in schema["enum"])
        return f"{_where(path)} must be one of {choices}, got {value!r}"
    if "const" in schema and not _json_equal(value, schema["const"]):
        return f"{_where(path)} must be {schema['const']!r}, got {value!r}"
    problem = (
        _string_problem(value, schema, path)
        or _number_problem(value, schema, path)
        or _array_problem(value, schema, root, path, depth)
        or _object_problem(value, schema, root, path, depth)
    )
    if problem is not None:
        return problem
    for sub in schema.get("allOf") or []:
        problem = _first_problem(value, sub, root, path, depth + 1)
        if problem is not None:
            return problem
    for keyword in ("anyOf", "oneOf"):
        options = schema.get(keyword)
        if options:
            problems = [_first_problem(value, sub, root, path, depth + 1) for sub in options]
            passed = problems.count(None)
            if passed == 0:
                return problems[0]
            if keyword == "oneOf" and passed > 1:
                return f"{_where(path)} matches more than one of the allowed forms"
    if "not" in schema and _first_problem(value, schema["not"], root, path, depth + 1) is None:
        return f"{_where(path)} has a form that is not allowed"
    return None


def _string_problem(value: Any, schema: dict[str, Any], path: str) -> str | None:
    if not isinstance(value, str):
        return None
    if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
        return f"{_where(path)} must have at least {schema['minLength']} characters"
    if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
        return f"{_where(path)} must have at most {schema['maxLength']} characters"
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            if re.search(pattern, value) is None:
                return f"{_where(path)} must match the pattern {pattern!r}, got {value!r}"
        except re.error:
            pass  # a pattern Python cannot read is the server's to check
    return None


def _number_problem(value: Any, schema: dict[str, Any], path: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    bounds = [
        ("minimum", lambda v, b: v >= b, "at least"),
        ("maximum", lambda v, b: v <= b, "at most"),
        ("exclusiveMinimum", lambda v, b: v > b, "more than"),
        ("exclusiveMaximum", lambda v, b: v < b, "less than"),
    ]
    for keyword, ok, words in bounds:
        bound = schema.get(keyword)
        if isinstance(bound, bool):  # draft 4: a flag on minimum/maximum
            base = schema.get("minimum" if keyword == "exclusiveMinimum" else "maximum")
            if not bound or base is None:
                continue
            bound = base
        if isinstance(bound, (int, float)) and not ok(value, bound):
            return f"{_where(path)} must be {words} {bound}, got {value!r}"
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and step > 0 and not isinstance(step, bool):
        ratio = value / step
        if abs(ratio - round(ratio)) > 1e-9:
            return f"{_where(path)} must be a multiple of {step}, got {value!r}"
    return None


def _array_problem(
    value: Any, schema: dict[str, Any], root: dict[str, Any], path: str, depth: int
) -> str | None:
    if not isinstance(value, list):
        return None
    if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
        return f"{_where(path)} must have at least {schema['minItems']} items"
    if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
        return f"{_where(path)} must have at most {schema['maxItems']} items"
    if schema.get("uniqueItems") is True:
        seen = [json.dumps(item, sort_keys=True) for item in value]
        if len(set(seen)) != len(seen):
            return f"{_where(path)} must not repeat items"
    prefix = schema.get("prefixItems")
    items = schema.get("items")
    if isinstance(items, list):  # draft 4-7 tuple form
        prefix, items = items, schema.get("additionalItems")
    prefix = prefix if isinstance(prefix, list) else []
    for index, item in enumerate(value):
        sub = prefix[index] if index < len(prefix) else items
        if sub is None:
            continue
        problem = _first_problem(item, sub, root, f"{path}[{index}]", depth + 1)
        if problem is not None:
            return problem
    return None


def _object_problem(
    value: Any, schema: dict[str, Any], root: dict[str, Any], path: str, depth: int
) -> str | None:
    if not isinstance(value, dict):
        return None
    for name in schema.get("required") or []:
        if name not in value:
            return f"{_where(_join(path, name))} is required"
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    patterns = schema.get("patternProperties")
    patterns = patterns if isinstance(patterns, dict) else {}
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        where = _join(path, key)
        matched = False
        if key in properties:
            matched = True
            problem = _first_problem(item, properties[key], root, where, depth + 1)
            if problem is not None:
                return problem
        for pattern, sub in patterns.items():
            try:
                hit = re.search(pattern, key) is not None
            except re.error:
                hit = False
            if hit:
                matched = True
                problem = _first_problem(item, sub, root, where, depth + 1)
                if problem is not None:
                    return problem
        if matched:
            continue
        if extra is False:
            known = ", ".join(sorted(properties)) or "none"
            return f"{_where(where)} is not a parameter of this tool (known: {known})"
        if isinstance(extra, dict):
            problem = _first_problem(item, extra, root, where, depth + 1)
            if problem is not None:
                return problem
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def resolve_ref(root: Any, ref: str) -> Any:
    """The node a local JSON pointer (``#/$defs/Item``) names in ``root``, or None."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    return True  # an unknown type name is the server's to judge


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _describe_value(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}" if value is not None else "None"


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
    server: str,
    tool: str,
    arguments: dict[str, Any] | None = None,
    timeout: float | None = None,
    *,
    schema: dict[str, Any] | None = None,
) -> Any:
    """Call a tool of a live MCP server; the host makes the call, this process never does.

    ``schema`` (the tool's input schema) checks the arguments before they leave the sandbox,
    and an optional argument given as None is left out (the server applies its default);
    ``timeout`` (seconds) overrides the host's default limit for this call. Raises ToolError with
    the server's message when the tool fails.
    """
    if _agent is None:
        raise ToolError("call_tool works only inside a cemcp sandbox", server, tool)
    plain = check_arguments(arguments if arguments is not None else {}, schema, server, tool)
    return _agent.call_tool(server, tool, plain, timeout)


async def call_tool_async(
    server: str,
    tool: str,
    arguments: dict[str, Any] | None = None,
    timeout: float | None = None,
    *,
    schema: dict[str, Any] | None = None,
) -> Any:
    """``call_tool`` as a coroutine: ``await`` it, or run several with ``asyncio.gather``."""
    if _agent is None:
        raise ToolError("call_tool works only inside a cemcp sandbox", server, tool)
    plain = check_arguments(arguments if arguments is not None else {}, schema, server, tool)
    return await _agent.call_tool_async(server, tool, plain, timeout)


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
