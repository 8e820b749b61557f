"""A scripted OpenAI-compatible HTTP server on 127.0.0.1: recorded model answers, offline.

It answers ``POST /v1/chat/completions`` (and Azure's
``/openai/deployments/<name>/chat/completions``), streams as server-sent events when asked, and
records every request, so the real ``openai`` client talks to it over real HTTP. Answers come
from a queue (tests script each reply, including failures: 429, 500, delays, rejected
parameters), or are looked up by the request text (``recorded``: the tutorials replay the code a
model wrote for each request, so they run without a model or a network). It is not a model: a
request it has no answer for gets a clear error saying so.

    python -m cemcp_kernel.scripted_model answers.json     # prints its base URL
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Reply:
    """One scripted answer. ``status`` other than 200 sends an OpenAI-style error body."""

    content: str = ""
    status: int = 200
    error: str = ""
    delay: float = 0.0
    reject_param: str | None = None  # answer 400 if the request carries this parameter
    usage: bool = True


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ScriptedOpenAI:
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Request] = field(default_factory=list)
    default: Reply | None = None
    recorded: dict[str, str] = field(default_factory=dict)  # request text -> answer

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedOpenAI:
        """Recorded answers from a JSON object ``{"request text": "answer", ...}``."""
        answers = json.loads(Path(path).read_text())
        return cls(recorded={" ".join(k.split()): v for k, v in answers.items()})

    def __post_init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def start(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, *replies: Reply | str) -> None:
        for reply in replies:
            self.replies.append(Reply(content=reply) if isinstance(reply, str) else reply)

    def next_reply(self, body: dict[str, Any]) -> Reply:
        if self.recorded:
            return self._recorded(body)
        while self.replies:
            reply = self.replies.popleft()
            if reply.reject_param and reply.reject_param not in body:
                continue  # the client already adapted; the rejection does not apply
            return reply
        return self.default or Reply(status=500, error="the scripted server has no reply left")

    def _recorded(self, body: dict[str, Any]) -> Reply:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        request = " ".join(str(users[-1].get("content", "")).split()) if users else ""
        if request in self.recorded:
            return Reply(content=self.recorded[request])
        return Reply(
            status=404,
            error=f"No recorded answer for {request[:80]!r}: this endpoint replays recorded "
            "answers only. Configure a real model (OPENAI_API_KEY / OPENAI_BASE_URL) for new "
            "requests.",
        )


def _completion(model: str, content: str, usage: bool, body: dict[str, Any]) -> dict[str, Any]:
    prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
    out: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    if usage:
        out["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": len(content) // 4,
            "total_tokens": prompt + len(content) // 4,
        }
    return out


def _handler(script: ScriptedOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            headers = {k.lower(): v for k, v in self.headers.items()}
            script.requests.append(Request(self.path, headers, body))
            if not re.search(r"/chat/completions$", self.path.split("?")[0]):
                return self._json(404, {"error": {"message": f"no route {self.path}"}})
            reply = script.next_reply(body)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.reject_param:
                param = reply.reject_param
                other = "max_completion_tokens" if param == "max_tokens" else "max_tokens"
                message = f"Unsupported parameter: '{param}' is not supported with this model."
                if param in ("max_tokens", "max_completion_tokens"):
                    message += f" Use '{other}' instead."
                return self._json(400, _error(message, "invalid_request_error", param))
            if reply.status != 200:
                return self._json(
                    reply.status, _error(reply.error or "scripted failure", "server_error")
                )
            model = str(body.get("model", "scripted"))
            if body.get("stream"):
                return self._stream(model, reply, body)
            return self._json(200, _completion(model, reply.content, reply.usage, body))

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, model: str, reply: Reply, body: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            pieces = re.findall(r"\S*\s*", reply.content) or [""]
            base = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "model": model,
                "created": 0,
            }
            for piece in pieces:
                if not piece:
                    continue
                chunk = {
                    **base,
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
            if reply.usage and (body.get("stream_options") or {}).get("include_usage"):
                usage = _completion(model, reply.content, True, body)["usage"]
                self.wfile.write(
                    f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n".encode()
                )
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler


def _error(message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


if __name__ == "__main__":
    import sys

    server = ScriptedOpenAI.from_file(sys.argv[1]) if len(sys.argv) > 1 else ScriptedOpenAI()
    server.start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
