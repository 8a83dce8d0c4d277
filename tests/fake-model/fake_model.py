#!/usr/bin/env python3
"""A fake model server for host end-to-end tests (Python 3.11 standard library only).

One HTTP/1.1 server on 127.0.0.1 speaks the three wire formats the verified hosts use, routed by
path (the query string is stripped before routing, kept in the log):

- ``POST /v1/chat/completions``   OpenAI chat completions (OpenClaw, Hermes, CodeBuddy)
- ``POST /v1/responses``          OpenAI Responses (Codex), namespace tools included
- ``POST /v1/messages``           Anthropic Messages (Claude Code)
- ``POST /v1/messages/count_tokens``, ``GET /v1/models``, ``GET /v1/models/<id>``
- any other ``GET``/``HEAD`` → 200 ``{}``; any other ``POST`` → 200 ``{}``

Every request is logged as one JSON line ``{method, path, headers, body}`` (``authorization``
and ``x-api-key`` removed). Replies are text unless a *tool plan* is given: an ordered list of
``(name, arguments)`` steps. For each request the server walks the plan and returns a call to the
first step whose tool is offered (its name equals the step's name or ends with ``__<name>``;
Responses namespaces are searched too) and whose result the request does not yet carry. When
no step applies it answers with text, so a host never loops on a tool.

Command line::

    python3 fake_model.py --port 0 --log REQUESTS.jsonl [--tool NAME --tool-args JSON]... [--reply TEXT]

prints ``PORT <n>`` as its first stdout line once listening. From Python::

    with FakeModel(log_path=p, tools=[("skill_search", {"query": "…"})]) as fm:
        fm.port, fm.requests
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable

HIDDEN_HEADERS = {"authorization", "x-api-key"}
MODEL_ID = "fake-model"


def _matches(offered: str, wanted: str) -> bool:
    return offered == wanted or offered.endswith("__" + wanted)


# ---------------------------------------------------------------------------------------------
# What each wire format offers and already carries


def chat_offered(body: dict) -> list[dict]:
    """Offered tools as ``{"name"}`` dicts (chat completions)."""
    out = []
    for t in body.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.append({"name": fn["name"]})
    return out


def chat_has_result(body: dict, name: str) -> bool:
    ids = set()
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "assistant":
            for c in m.get("tool_calls") or []:
                if (c.get("function") or {}).get("name") == name:
                    ids.add(c.get("id"))
    return any(
        isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id") in ids
        for m in body.get("messages") or []
    )


def responses_offered(body: dict) -> list[dict]:
    """Offered tools as ``{"name", "namespace"?}`` (Responses; namespaces searched)."""
    out = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            for inner in t.get("tools") or []:
                if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                    out.append({"name": inner["name"], "namespace": t.get("name")})
        elif isinstance(t.get("name"), str):
            out.append({"name": t["name"]})
    return out


def responses_has_result(body: dict, name: str) -> bool:
    items = body.get("input")
    if not isinstance(items, list):
        return False
    ids = {
        i.get("call_id")
        for i in items
        if isinstance(i, dict) and i.get("type") == "function_call" and i.get("name") == name
    }
    return any(
        isinstance(i, dict)
        and i.get("type") in ("function_call_output", "custom_tool_call_output")
        and i.get("call_id") in ids
        for i in items
    )


def messages_offered(body: dict) -> list[dict]:
    return [
        {"name": t["name"]}
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]


def messages_has_result(body: dict, name: str) -> bool:
    ids, results = set(), set()
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use" and b.get("name") == name:
                ids.add(b.get("id"))
            elif b.get("type") == "tool_result":
                results.add(b.get("tool_use_id"))
    return bool(ids & results)


WIRES = {
    "chat": (chat_offered, chat_has_result),
    "responses": (responses_offered, responses_has_result),
    "messages": (messages_offered, messages_has_result),
}


def choose_call(wire: str, body: dict, plan: Iterable[tuple[str, Any]]) -> dict | None:
    """The tool call this request should get: ``{"name", "namespace"?, "arguments"}`` or None."""
    offered_of, has_result = WIRES[wire]
    offered = offered_of(body)
    for wanted, args in plan:
        hit = next((t for t in offered if _matches(t["name"], wanted)), None)
        if hit is None or has_result(body, hit["name"]):
            continue
        return {**hit, "arguments": args if args is not None else {}}
    return None


# ---------------------------------------------------------------------------------------------
# Replies


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing --------------------------------------------------------------------------
    def _read_body(self) -> Any:
        raw = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
        enc = self.headers.get("Content-Encoding", "").lower()
        try:
            if enc == "gzip":
                raw = gzip.decompress(raw)
            elif enc == "deflate":
                raw = zlib.decompress(raw)
        except Exception:
            pass
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _record(self, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in HIDDEN_HEADERS}
        self.server.model.record(
            {"method": self.command, "path": self.path, "headers": headers, "body": body}
        )

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _stream(self, chunks: Iterable[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for c in chunks:
            self.wfile.write(c)
        self.wfile.flush()
        self.close_connection = True

    # -- methods ---------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self._record(None)
        self._json({})

    def do_GET(self) -> None:
        self._record(None)
        route = self.path.split("?", 1)[0].rstrip("/")
        if route == "/v1/models":
            self._json(
                {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "fake"}]}
            )
        elif route.startswith("/v1/models/"):
            mid = route[len("/v1/models/") :]
            self._json({"id": mid, "object": "model", "owned_by": "fake"})
        else:
            self._json({})

    def do_POST(self) -> None:
        body = self._read_body()
        self._record(body)
        route = self.path.split("?", 1)[0].rstrip("/")
        b = body if isinstance(body, dict) else {}
        if route == "/v1/chat/completions":
            self._chat(b)
        elif route == "/v1/responses":
            self._responses(b)
        elif route == "/v1/messages/count_tokens":
            self._json({"input_tokens": self.server.model.tokens(b)})
        elif route == "/v1/messages":
            self._messages(b)
        else:
            self._json({})

    # -- OpenAI chat completions -----------------------------------------------------------
    def _chat(self, b: dict) -> None:
        fm = self.server.model
        call = choose_call("chat", b, fm.plan)
        rid, created, model = f"chatcmpl-{fm.next_id()}", int(time.time()), b.get("model", MODEL_ID)
        usage = {"prompt_tokens": fm.tokens(b), "completion_tokens": 5}
        usage["total_tokens"] = usage["prompt_tokens"] + 5
        cid = f"call_{fm.next_id()}"
        if call:
            fn = {"name": call["name"], "arguments": json.dumps(call["arguments"])}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": fn}],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": fm.reply}
            finish = "stop"
        if not b.get("stream"):
            self._json(
                {
                    "id": rid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
            return

        def chunk(choices: list, **extra: Any) -> bytes:
            obj = {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": choices,
                **extra,
            }
            return _sse(None, obj)

        out = []
        if call:
            tc = [{"index": 0, "id": cid, "type": "function", "function": message["tool_calls"][0]["function"]}]
            delta = {"role": "assistant", "tool_calls": tc}
        else:
            delta = {"role": "assistant", "content": fm.reply}
        out.append(chunk([{"index": 0, "delta": delta, "finish_reason": None}]))
        out.append(chunk([{"index": 0, "delta": {}, "finish_reason": finish}]))
        if (b.get("stream_options") or {}).get("include_usage"):
            out.append(chunk([], usage=usage))
        out.append(b"data: [DONE]\n\n")
        self._stream(out)

    # -- OpenAI Responses ------------------------------------------------------------------
    def _responses(self, b: dict) -> None:
        fm = self.server.model
        call = choose_call("responses", b, fm.plan)
        n = fm.next_id()
        resp = {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": int(time.time()),
            "model": b.get("model", MODEL_ID),
            "status": "in_progress",
            "output": [],
        }
        if call:
            item = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": call["name"],
                "arguments": json.dumps(call["arguments"]),
                "status": "completed",
            }
            if call.get("namespace"):
                item["namespace"] = call["namespace"]
        else:
            item = {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": fm.reply, "annotations": []}],
            }
        inp = fm.tokens(b)
        usage = {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inp + 5,
        }
        done = {**resp, "status": "completed", "output": [item], "usage": usage}
        if not b.get("stream"):
            self._json(done)
            return
        seq = itertools.count()

        def ev(kind: str, **data: Any) -> bytes:
            return _sse(kind, {"type": kind, "sequence_number": next(seq), **data})

        added = {**item, "status": "in_progress"}
        if item["type"] == "message":
            added["content"] = []
        out = [
            ev("response.created", response=resp),
            ev("response.output_item.added", output_index=0, item=added),
        ]
        if item["type"] == "message":
            out.append(
                ev(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=0,
                    content_index=0,
                    delta=fm.reply,
                )
            )
        out.append(ev("response.output_item.done", output_index=0, item=item))
        out.append(ev("response.completed", response=done))
        self._stream(out)

    # -- Anthropic Messages ----------------------------------------------------------------
    def _messages(self, b: dict) -> None:
        fm = self.server.model
        call = choose_call("messages", b, fm.plan)
        n = fm.next_id()
        if call:
            block = {"type": "tool_use", "id": f"toolu_{n}", "name": call["name"], "input": call["arguments"]}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": fm.reply}
            stop = "end_turn"
        msg = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": b.get("model", MODEL_ID),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": fm.tokens(b), "output_tokens": 1},
        }
        if not b.get("stream"):
            self._json({**msg, "content": [block], "stop_reason": stop, "usage": {**msg["usage"], "output_tokens": 5}})
            return
        if call:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(call["arguments"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": fm.reply}

        def ev(kind: str, **data: Any) -> bytes:
            return _sse(kind, {"type": kind, **data})

        self._stream(
            [
                ev("message_start", message=msg),
                ev("content_block_start", index=0, content_block=start),
                ev("content_block_delta", index=0, delta=delta),
                ev("content_block_stop", index=0),
                ev(
                    "message_delta",
                    delta={"stop_reason": stop, "stop_sequence": None},
                    usage={"output_tokens": 5},
                ),
                ev("message_stop"),
            ]
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    model: "FakeModel"


class FakeModel:
    """The fake model server, run on a background thread (a context manager)."""

    def __init__(
        self,
        port: int = 0,
        log_path: str | None = None,
        tools: list[tuple[str, Any]] | None = None,
        reply: str = "Done.",
    ) -> None:
        self.plan = list(tools or [])
        self.reply = reply
        self.log_path = log_path
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.model = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    @staticmethod
    def tokens(body: Any) -> int:
        return max(1, len(json.dumps(body)) // 4)

    def record(self, entry: dict) -> None:
        with self._lock:
            self.requests.append(entry)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry) + "\n")

    def model_requests(self) -> list[dict]:
        """Requests that asked the model for a turn (any wire format)."""
        routes = ("/v1/chat/completions", "/v1/responses", "/v1/messages")
        return [
            r
            for r in self.requests
            if r["method"] == "POST" and r["path"].split("?", 1)[0].rstrip("/") in routes
        ]

    def start(self) -> "FakeModel":
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeModel":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", help="append every request here as one JSON line")
    ap.add_argument("--tool", action="append", default=[], help="a tool to call, in plan order")
    ap.add_argument(
        "--tool-args", action="append", default=[], help="JSON arguments of the matching --tool"
    )
    ap.add_argument("--reply", default="Done.", help="the text reply")
    a = ap.parse_args(argv)
    if len(a.tool_args) > len(a.tool):
        ap.error("--tool-args given without a --tool")
    plan = []
    for i, name in enumerate(a.tool):
        args = json.loads(a.tool_args[i]) if i < len(a.tool_args) else {}
        plan.append((name, args))
    fm = FakeModel(port=a.port, log_path=a.log, tools=plan, reply=a.reply)
    print(f"PORT {fm.port}", flush=True)
    try:
        fm._server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
