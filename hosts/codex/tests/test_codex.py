"""Codex CLI 0.171.0, headless (`codex exec`), against the fake Responses server.

The test writes only the model provider into config.toml; `skillsearch setup codex` merges the
MCP server (with its approval mode) or the hook (with its recorded trust) into it. The turn is
the plain `codex exec`: no `--dangerously-bypass-hook-trust`.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import e2e  # noqa: E402
from e2e import FACT, QUERY, UNRELATED, FakeModel  # noqa: E402

HOST = "codex"

PROVIDER = """model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.fake]
name = "Fake"
base_url = "{base}/v1"
env_key = "FAKE_OPENAI_KEY"
wire_api = "responses"
"""


def prepare(ws, fm, mode):
    e2e.host_bin("CODEX_BIN")
    cfg = ws.home / ".codex" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(PROVIDER.format(base=fm.base_url))
    ws.setup(HOST, mode)


def turn(ws, fm, prompt, case):
    codex = e2e.host_bin("CODEX_BIN")
    p = e2e.timed(
        HOST,
        case,
        [codex, "exec", "--skip-git-repo-check", prompt],
        cwd=ws.project,
        env=ws.env(FAKE_OPENAI_KEY="x"),
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Done." in p.stdout
    return p


def test_p1_auto_injects_the_skill(tmp_path):
    ws = e2e.workspace(tmp_path)
    with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
        prepare(ws, fm, "auto")
        e2e.assert_green(ws.doctor(HOST))
        p = turn(ws, fm, QUERY, "p1-auto")
    assert "hook: UserPromptSubmit Completed" in p.stderr
    e2e.assert_injected(fm)
    first = fm.model_requests()[0]["body"]["input"]
    assert any(i.get("role") == "developer" and FACT in e2e.text_of(i) for i in first)


def test_p2_on_demand_search_tool(tmp_path):
    ws = e2e.workspace(tmp_path)
    with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
        prepare(ws, fm, "on_demand")
        e2e.assert_green(ws.doctor(HOST))
        p = turn(ws, fm, QUERY, "p2-on_demand")
    assert "skillsearch/skill_search (completed)" in p.stderr
    e2e.assert_searched(fm)
    ns = [t for t in fm.model_requests()[0]["body"]["tools"] if t.get("type") == "namespace"]
    assert any(t["name"] == "mcp__skillsearch" for t in ns)


def test_p3_unrelated_prompt_injects_and_calls_nothing(tmp_path):
    ws = e2e.workspace(tmp_path)
    with FakeModel() as fm:
        prepare(ws, fm, "auto")
        turn(ws, fm, UNRELATED, "p3-unrelated")
    e2e.assert_nothing(fm)


def test_p4_misspelled_mode_is_rejected(tmp_path):
    ws = e2e.workspace(tmp_path)
    p = ws.skillsearch("setup", HOST, "--mode", "atuo")
    assert p.returncode == 2 and "--mode" in p.stderr and "atuo" in p.stderr, p.stderr
    assert not (ws.home / ".codex").exists()


def test_p5_engine_fails_the_turn_completes(tmp_path):
    for mode, how in e2e.ENGINE_FAILURES:
        ws = e2e.workspace(tmp_path / f"{mode}-{how}", own_binary=True)
        with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
            prepare(ws, fm, mode)
            e2e.break_engine(ws, how)
            if how == "missing":
                doc = ws.doctor(HOST)
                assert doc["exit"] == 1
                assert any(c["name"] == "binary" and c["status"] == "fail" for c in doc["checks"])
            turn(ws, fm, QUERY, f"p5-{how}-{mode}")
        assert FACT not in e2e.text_of([q["body"] for q in fm.model_requests()])
