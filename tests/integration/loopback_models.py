"""Loopback HTTP servers that speak the OpenAI Chat Completions and Anthropic Messages protocols.

Each server listens on 127.0.0.1 (port 0), answers each request from a script (then from a
default), and records every request it received so tests can assert on what was sent::

    with LoopbackModelServer("openai") as server:
        server.script(server.error(500), server.ok("hello", prompt_tokens=3, completion_tokens=1))
        provider = OpenAICompatibleProvider("p", server.base_url, "m", None)
        ...
        assert server.requests[-1].json["max_tokens"] == 64

A script entry is a :class:`Reply` or a callable ``RecordedRequest -> Reply`` (to answer from
the prompt). Requests to any path other than the protocol's endpoint get a 404.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

PROTOCOLS = ("openai", "anthropic")
ENDPOINTS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


@attrs.frozen(kw_only=True)
class Reply:
    """One scripted answer: status, a JSON body (or raw bytes), extra headers, a delay before it."""

    status: int = 200
    json: Any = None
    raw: bytes | None = None
    delay_s: float = 0.0
    headers: Mapping[str, str] = attrs.field(factory=dict)

    def body(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return json.dumps(self.json).encode("utf-8") if self.json is not None else b""


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """A request as the server received it; header names are lower-cased."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    json: Any  # the parsed body, or None when it is not JSON


Responder = Reply | Callable[[RecordedRequest], Reply]


def fenced_json(obj: Any) -> str:
    """``obj`` as a model often writes it: one JSON object inside a ```json fenced block."""
    return "```json\n" + json.dumps(obj, indent=2) + "\n```"


def prose_around_json(obj: Any) -> str:
    """``obj`` as JSON with chatty prose before and after it."""
    return "Sure! Here is what I found:\n" + json.dumps(obj) + "\nLet me know if you need anything else."


def refusing(server: LoopbackModelServer, refused: set[str], answer: Responder,
             *, style: str = "openai") -> Callable[[RecordedRequest], Reply]:
    """A responder that, like a real server, answers 400 to any request carrying one of the
    ``refused`` body fields (``response_format`` types count as ``json_schema`` and
    ``json_object``), and otherwise answers ``answer``."""

    def respond(request: RecordedRequest) -> Reply:
        body = request.json if isinstance(request.json, dict) else {}
        fields = set(body)
        if isinstance(body.get("response_format"), dict):
            fields.add(str(body["response_format"].get("type")))
        for name in sorted(fields & refused):
            return server.unsupported_parameter(name, style=style)
        return answer(request) if callable(answer) else answer

    return respond


def unused_base_url() -> str:
    """A loopback URL nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class LoopbackModelServer:
    """A scriptable model server on 127.0.0.1 speaking ``protocol`` ("openai" or "anthropic")."""

    def __init__(self, protocol: str) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}")
        self.protocol = protocol
        self.endpoint = ENDPOINTS[protocol]
        self._lock = threading.Lock()
        self._script: deque[Responder] = deque()
        self._default: Responder = self.ok("ok")
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    # --- addresses ---------------------------------------------------------------------------

    @property
    def root_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"  # bound to 127.0.0.1 above

    @property
    def base_url(self) -> str:
        """The ``base_url`` the matching provider adapter expects."""
        return self.root_url + "/v1" if self.protocol == "openai" else self.root_url

    # --- scripting ---------------------------------------------------------------------------

    def script(self, *responders: Responder) -> None:
        """Queue answers for the next requests, in order; afterwards the default answers."""
        with self._lock:
            self._script.extend(responders)

    def always(self, responder: Responder) -> None:
        """Answer every request not covered by the script with ``responder``."""
        with self._lock:
            self._default = responder

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    # --- answers in this server's protocol ---------------------------------------------------

    def ok(
        self,
        text: str,
        *,
        prompt_tokens: int = 12,
        completion_tokens: int = 5,
        delay_s: float = 0.0,
        model: str = "loopback",
    ) -> Reply:
        """A successful completion with ``text``, the given usage and the served ``model``."""
        if self.protocol == "openai":
            body: dict[str, Any] = {
                "id": "chatcmpl-loopback",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        else:
            body = {
                "id": "msg_loopback",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
            }
        return Reply(json=body, delay_s=delay_s)

    def slow(self, delay_s: float = 1.0, text: str = "too late") -> Reply:
        """A success that only starts after ``delay_s`` (longer than the client's timeout)."""
        return self.ok(text, delay_s=delay_s)

    def error(
        self, status: int, message: str = "loopback failure", *, retry_after: str | None = None
    ) -> Reply:
        """An error status with the protocol's error body (429, 500, 529, 401, ...)."""
        if self.protocol == "openai":
            body: dict[str, Any] = {"error": {"message": message, "type": "server_error", "code": None}}
        else:
            kind = "overloaded_error" if status == 529 else "api_error"
            body = {"type": "error", "error": {"type": kind, "message": message}}
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        return Reply(status=status, json=body, headers=headers)

    def unsupported_parameter(self, param: str, *, style: str = "openai") -> Reply:
        """The 400 a real server sends for a parameter the model does not take.

        ``openai``: OpenAI's own wording and body (``param`` and ``code`` set); ``litellm``: a
        LiteLLM proxy's (only the message names it); ``anthropic``: Anthropic's validation error.
        """
        if style == "openai" and param in ("json_schema", "json_object"):
            message = f"Invalid parameter: 'response_format' of type '{param}' is not supported with this model."
            body: dict[str, Any] = {"error": {"message": message, "type": "invalid_request_error",
                                              "param": "response_format", "code": None}}
        elif style == "openai":
            message = f"Unsupported parameter: '{param}' is not supported with this model."
            if param == "max_tokens":
                message += " Use 'max_completion_tokens' instead."
            body = {"error": {"message": message, "type": "invalid_request_error",
                              "param": param, "code": "unsupported_parameter"}}
        elif style == "litellm":
            message = (f"litellm.UnsupportedParamsError: openai does not support parameters: ['{param}'],"
                       " for model=gpt-4o. To drop these, set `litellm.drop_params=True`.")
            body = {"error": {"message": message, "type": None, "param": None, "code": "400"}}
        else:
            body = {"type": "error", "error": {"type": "invalid_request_error",
                                               "message": f"{param}: Extra inputs are not permitted"}}
        return Reply(status=400, json=body)

    def tool_answer(self, name: str, arguments: Any, *, model: str = "loopback") -> Reply:
        """Anthropic: an answer that is one ``tool_use`` block calling ``name`` with ``arguments``."""
        body = self.ok("", model=model).json
        body["content"] = [{"type": "tool_use", "id": "toolu_loopback", "name": name, "input": arguments}]
        body["stop_reason"] = "tool_use"
        return Reply(json=body)

    def malformed(self) -> Reply:
        """A 200 whose body is not JSON at all."""
        return Reply(raw=b'{"choices": [ this is not json', headers={"content-type": "application/json"})

    def missing_fields(self) -> Reply:
        """A 200 with a JSON object lacking the protocol's answer fields."""
        return Reply(json={"id": "loopback", "object": "nothing-useful"})

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on a slow reply
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackModelServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def reply_to(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            if request.method != "POST" or request.path != self.endpoint:
                return self.error(404, f"no route for {request.method} {request.path}")
            responder = self._script.popleft() if self._script else self._default
        return responder(request) if callable(responder) else responder

    def pause(self, delay_s: float) -> None:
        self._stopping.wait(delay_s)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a handler still sleeping on a slow reply must not delay teardown
    owner: LoopbackModelServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=raw,
            json=parsed,
        )
        owner = self.server.owner
        reply = owner.reply_to(request)
        if reply.delay_s:
            owner.pause(reply.delay_s)
        body = reply.body()
        try:
            self.send_response(reply.status)
            headers = {"content-type": "application/json", **reply.headers}
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout) before the slow reply came

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean


# What weak local models (small Ollama / llama.cpp models) answer when asked to save
# "I live in Paris": name -> (answer, repaired?). The intended operation is WEAK_MODEL_OPERATION.
WEAK_MODEL_OPERATION = {"op": "add", "category": "identity", "key": "home_city", "value": "Lives in Paris"}
_OP = json.dumps(WEAK_MODEL_OPERATION)
_PY_OP = "{'op': 'add', 'category': 'identity', 'key': 'home_city', 'value': 'Lives in Paris'}"
WEAK_MODEL_ANSWERS: dict[str, tuple[str, bool]] = {
    "prose-around-json": (f'Sure! Here is the JSON:\n{{"operations": [{_OP}]}}\nLet me know!', True),
    "prose-and-fence": (f'Here you go:\n```json\n{{"operations": [{_OP}]}}\n```\nHope this helps.', True),
    "trailing-commas": (f'{{"operations": [{_OP[:-1]},}},]}}', True),
    "single-quotes": (f"{{'operations': [{_PY_OP}]}}", True),
    "fence-prose-trailing-comma": (f'Answer:\n```\n{{"operations": [{_OP}],}}\n```', True),
    "think-block": (f'<think>The user states a home city.</think>\n{{"operations": [{_OP}]}}', True),
    "json-with-comments": (f'{{"operations": [{_OP}] // the home city\n}}', False),
    "one-object-per-operation": (f'{{"operations": [{_OP}]}}\n{{"operations": []}}', False),
    "truncated": (f'{{"operations": [{_OP[:40]}', False),
    "nothing-without-period": ("Nothing to save", False),
    "nothing-with-explanation": ("Nothing to save. The user only chatted.", False),
    "unquoted-keys": ('{operations: [{op: "add", category: "identity", key: "home_city", value: "Paris"}]}', False),
    "bare-list": (f"[{_OP}]", False),
    "null-confidence": (f'{{"operations": [{_OP[:-1]}, "confidence": null}}]}}', False),
    "smart-quotes": ("{\u201coperations\u201d: []}", False),
}
