"""Self-test of the fake model server: every route, both ways of starting it, the tool plan."""

import json
import os
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from fake_model import FakeModel  # noqa: E402


def post(base, path, body, headers=None):
    req = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers.get("Content-Type", ""), r.read().decode()


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.loads(r.read())


def sse_events(text):
    """[(event or None, data)] of an SSE stream."""
    out = []
    for block in text.strip().split("\n\n"):
        ev, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                ev = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        out.append((ev, data if data == "[DONE]" else json.loads(data)))
    return out


def test_chat_stream_text_usage_and_done(tmp_path):
    log = tmp_path / "r.jsonl"
    with FakeModel(log_path=str(log), reply="hello") as fm:
        ctype, text = post(
            fm.base_url,
            "/v1/chat/completions",
            {"model": "m", "stream": True, "stream_options": {"include_usage": True},
             "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
            {"Authorization": "Bearer secret", "X-Api-Key": "k"},
        )
    assert ctype.startswith("text/event-stream")
    evs = sse_events(text)
    assert evs[0][1]["choices"][0]["delta"]["content"] == "hello"
    assert evs[1][1]["choices"][0]["finish_reason"] == "stop"
    assert evs[2][1]["choices"] == [] and "total_tokens" in evs[2][1]["usage"]
    assert evs[-1] == (None, "[DONE]")
    logged = [json.loads(l) for l in log.read_text().splitlines()]
    assert logged[0]["path"] == "/v1/chat/completions"
    assert "authorization" not in logged[0]["headers"] and "x-api-key" not in logged[0]["headers"]
    assert logged[0]["body"]["messages"][0]["role"] == "user"


def test_chat_tool_call_then_text_once_result_is_present():
    tools = [{"type": "function", "function": {"name": "mcp__skills__skill_search", "parameters": {}}}]
    with FakeModel(tools=[("skill_search", {"query": "q"})]) as fm:
        _, text = post(fm.base_url, "/v1/chat/completions",
                       {"stream": True, "tools": tools, "messages": [{"role": "user", "content": "x"}]})
        call = sse_events(text)[0][1]["choices"][0]["delta"]["tool_calls"][0]
        assert call["function"]["name"] == "mcp__skills__skill_search"
        assert json.loads(call["function"]["arguments"]) == {"query": "q"}
        assert sse_events(text)[1][1]["choices"][0]["finish_reason"] == "tool_calls"
        msgs = [
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": call["id"], "type": "function", "function": call["function"]}]},
            {"role": "tool", "tool_call_id": call["id"], "content": "result"},
        ]
        _, again = post(fm.base_url, "/v1/chat/completions", {"tools": tools, "messages": msgs})
    assert json.loads(again)["choices"][0]["message"]["content"] == "Done."


def test_plan_walks_steps_in_order():
    tools = [{"type": "function", "function": {"name": n}} for n in ("ToolSearch", "DeferExecuteTool")]
    plan = [("ToolSearch", {"q": 1}), ("DeferExecuteTool", {"q": 2})]
    with FakeModel(tools=plan) as fm:
        msgs = [{"role": "user", "content": "x"}]
        names = []
        for _ in range(3):
            body = json.loads(post(fm.base_url, "/v1/chat/completions", {"tools": tools, "messages": msgs})[1])
            m = body["choices"][0]["message"]
            if not m.get("tool_calls"):
                names.append("text")
                break
            c = m["tool_calls"][0]
            names.append(c["function"]["name"])
            msgs += [m, {"role": "tool", "tool_call_id": c["id"], "content": "r"}]
    assert names == ["ToolSearch", "DeferExecuteTool", "text"]


def test_responses_namespace_tool_and_completion():
    tools = [
        {"type": "function", "name": "shell"},
        {"type": "namespace", "name": "mcp__skills", "tools": [{"type": "function", "name": "skill_search"}]},
    ]
    with FakeModel(tools=[("skill_search", {"query": "q"})]) as fm:
        _, text = post(fm.base_url, "/v1/responses", {"stream": True, "tools": tools, "input": []})
        evs = sse_events(text)
        kinds = [e for e, _ in evs]
        assert kinds == ["response.created", "response.output_item.added",
                         "response.output_item.done", "response.completed"]
        item = evs[2][1]["item"]
        assert item["namespace"] == "mcp__skills" and item["name"] == "skill_search"
        inp = [item, {"type": "function_call_output", "call_id": item["call_id"], "output": "r"}]
        _, text = post(fm.base_url, "/v1/responses", {"stream": True, "tools": tools, "input": inp})
    evs = sse_events(text)
    assert "response.output_text.delta" in [e for e, _ in evs]
    done = evs[-1][1]["response"]
    assert done["status"] == "completed" and done["output"][0]["type"] == "message"
    assert "[DONE]" not in text


def test_messages_stream_tool_use_query_string_and_count_tokens():
    tools = [{"name": "mcp__plugin_skillsearch_skills__skill_search", "input_schema": {}}]
    with FakeModel(tools=[("skill_search", {"query": "q"})]) as fm:
        _, text = post(fm.base_url, "/v1/messages?beta=true",
                       {"stream": True, "tools": tools,
                        "messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "s"}]})
        evs = sse_events(text)
        assert [e for e, _ in evs] == ["message_start", "content_block_start", "content_block_delta",
                                       "content_block_stop", "message_delta", "message_stop"]
        block = evs[1][1]["content_block"]
        assert block["type"] == "tool_use" and block["input"] == {}
        assert json.loads(evs[2][1]["delta"]["partial_json"]) == {"query": "q"}
        assert evs[4][1]["delta"]["stop_reason"] == "tool_use"
        msgs = [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{**block, "input": {"query": "q"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "r"}]},
        ]
        _, text = post(fm.base_url, "/v1/messages?beta=true", {"stream": True, "tools": tools, "messages": msgs})
        assert sse_events(text)[2][1]["delta"] == {"type": "text_delta", "text": "Done."}
        _, n = post(fm.base_url, "/v1/messages/count_tokens", {"messages": []})
        assert json.loads(n)["input_tokens"] >= 1
        assert fm.requests[0]["path"] == "/v1/messages?beta=true"
        assert len(fm.model_requests()) == 2


def test_models_and_unknown_paths():
    with FakeModel() as fm:
        assert get(fm.base_url, "/v1/models")["data"][0]["id"] == "fake-model"
        assert get(fm.base_url, "/v1/models/fake-model")["id"] == "fake-model"
        assert get(fm.base_url, "/api/show") == {}


def test_command_line_prints_port_and_logs(tmp_path):
    log = tmp_path / "r.jsonl"
    p = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "fake_model.py"), "--port", "0", "--log", str(log),
         "--tool", "skill_search", "--tool-args", '{"query": "q"}'],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        first = p.stdout.readline().split()
        assert first[0] == "PORT"
        base = f"http://127.0.0.1:{first[1]}"
        tools = [{"type": "function", "function": {"name": "skill_search"}}]
        _, text = post(base, "/v1/chat/completions", {"tools": tools, "messages": []})
        assert json.loads(text)["choices"][0]["finish_reason"] == "tool_calls"
    finally:
        p.terminate()
        p.wait(10)
    assert json.loads(log.read_text().splitlines()[0])["method"] == "POST"
