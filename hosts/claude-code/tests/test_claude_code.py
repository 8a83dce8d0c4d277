"""Claude Code 2.1.197, headless (`claude -p`), against the fake Anthropic Messages server.

`skillsearch setup claude-code` writes the user settings (hook, permissions) and the user-scope
MCP server; after it the plain `claude -p` uses skillsearch. The plugin under
`hosts/claude-code/plugin` is exercised with `--plugin-dir`.
"""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

import e2e  # noqa: E402
from e2e import FACT, QUERY, UNRELATED, FakeModel  # noqa: E402

HOST = "claude-code"
PLUGIN = HERE.parent / "plugin"


def turn(ws, fm, prompt, case, *extra, **env):
    claude = e2e.host_bin("CLAUDE_BIN")
    p = e2e.timed(
        HOST,
        case,
        [claude, "-p", prompt, "--output-format", "json", *extra],
        cwd=ws.project,
        env=ws.env(
            ANTHROPIC_BASE_URL=fm.base_url,
            ANTHROPIC_API_KEY="sk-ant-fake",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            **env,
        ),
    )
    assert p.returncode == 0, p.stderr[-2000:]
    result = json.loads(p.stdout)
    assert result["type"] == "result" and not result["is_error"], result
    return result


def test_p1_auto_injects_the_skill(tmp_path):
    ws = e2e.workspace(tmp_path)
    e2e.host_bin("CLAUDE_BIN")
    ws.setup(HOST, "auto")
    e2e.assert_green(ws.doctor(HOST))
    with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
        turn(ws, fm, QUERY, "p1-auto")
    e2e.assert_injected(fm)


def test_p2_on_demand_search_tool(tmp_path):
    ws = e2e.workspace(tmp_path)
    e2e.host_bin("CLAUDE_BIN")
    ws.setup(HOST, "on_demand")
    e2e.assert_green(ws.doctor(HOST))
    with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
        r = turn(ws, fm, QUERY, "p2-on_demand")
    assert r["num_turns"] == 2
    e2e.assert_searched(fm, "mcp__skillsearch__skill_search")


def test_p3_unrelated_prompt_injects_and_calls_nothing(tmp_path):
    ws = e2e.workspace(tmp_path)
    e2e.host_bin("CLAUDE_BIN")
    ws.setup(HOST, "auto")
    with FakeModel() as fm:
        turn(ws, fm, UNRELATED, "p3-unrelated")
    e2e.assert_nothing(fm)


def test_p4_misspelled_mode_is_rejected(tmp_path):
    ws = e2e.workspace(tmp_path)
    p = ws.skillsearch("setup", HOST, "--mode", "atuo")
    assert p.returncode == 2 and "--mode" in p.stderr and "atuo" in p.stderr, p.stderr
    assert not (ws.home / ".claude" / "settings.json").exists()
    ws.setup(HOST, "auto")
    (ws.home / ".skillsearch").mkdir(exist_ok=True)
    (ws.home / ".skillsearch" / "config.toml").write_text('mode = "atuo"\n')
    doc = ws.doctor(HOST)
    bad = [c for c in doc["checks"] if c["status"] == "fail"]
    assert doc["exit"] == 1 and "`mode`" in bad[0]["detail"], bad


def test_p5_engine_fails_the_turn_completes(tmp_path):
    for mode, how in e2e.ENGINE_FAILURES:
        ws = e2e.workspace(tmp_path / f"{mode}-{how}", own_binary=True)
        e2e.host_bin("CLAUDE_BIN")
        ws.setup(HOST, mode)
        e2e.break_engine(ws, how)
        with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
            r = turn(ws, fm, QUERY, f"p5-{how}-{mode}")
        assert r["result"]
        assert FACT not in e2e.text_of([q["body"] for q in fm.model_requests()])


def test_plugin_dir_hook_and_mcp_server(tmp_path):
    """The plugin: its hook injects in auto mode; its MCP server answers in on_demand mode."""
    ws = e2e.workspace(tmp_path)
    # The plugin starts its MCP server while the hook runs; build the index first, because two
    # processes opening a fresh index at once can leave one of them with an empty index (an
    # engine race, reported; setup installs one of the two, so its tests never meet it).
    assert ws.skillsearch("index", "--skills", str(ws.skills)).returncode == 0
    env = {"SKILLSEARCH_BIN": ws.binary, "SKILLSEARCH_SKILLS_DIRS": str(ws.skills)}
    tool = "mcp__plugin_skillsearch_skills__skill_search"
    with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
        turn(ws, fm, QUERY, "plugin-auto", "--plugin-dir", str(PLUGIN), SKILLSEARCH_MODE="auto", **env)
    e2e.assert_injected(fm)
    with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
        turn(ws, fm, QUERY, "plugin-on_demand", "--plugin-dir", str(PLUGIN), "--allowedTools", tool,
             SKILLSEARCH_MODE="on_demand", **env)
    e2e.assert_searched(fm, tool)


def test_a_skill_published_to_a_team_hub_reaches_the_turn(tmp_path):
    """Issue 23: a skill published to a team's `skillsearch hub serve` (and held nowhere else)
    reaches a real Claude Code turn: `hub token create` → `hub publish` → the hub's store → the
    hook's hub client (`SKILLSEARCH_HUB_ENDPOINT`) → the injected block."""
    ws = e2e.workspace(tmp_path)
    e2e.host_bin("CLAUDE_BIN")
    team = tmp_path / "team-skills"
    team.mkdir()
    (ws.skills / "quarterly-decks").rename(team / "quarterly-decks")
    hub_home = tmp_path / "hub-home"
    token = subprocess.run(
        [ws.binary, "--home", str(hub_home), "hub", "token", "create", "--scope", "publish"],
        env=ws.env(), capture_output=True, text=True, check=True,
    ).stdout.strip()
    hub = subprocess.Popen(
        [ws.binary, "--home", str(hub_home), "hub", "serve", "--listen", "127.0.0.1:0"],
        env=ws.env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        base = json.loads(hub.stdout.readline())["listening"]
        published = subprocess.run(
            [ws.binary, "--home", str(tmp_path / "publisher"), "hub", "publish", str(team),
             "--hub", base],
            env={**ws.env(), "SKILLSEARCH_HUB_API_KEY": token}, capture_output=True, text=True,
        )
        assert published.returncode == 0, published.stderr
        assert "published quarterly-decks" in published.stdout, published.stdout
        ws.setup(HOST, "auto")
        with FakeModel(tools=[("skill_search", {"query": QUERY})]) as fm:
            turn(ws, fm, QUERY, "hub-auto", SKILLSEARCH_HUB_ENDPOINT=base)
        e2e.assert_injected(fm)
        first = e2e.text_of(fm.model_requests()[0]["body"])
        assert "[hub/" in first, "the skill came from the hub, not the local roots"
        assert token not in first
    finally:
        hub.kill()
        hub.wait()
