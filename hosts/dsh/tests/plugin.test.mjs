// Contract tests of the DSH plugin (hosts/dsh/plugin) against the real skillsearch binary, inside
// the real Cordis runtime (@deepseek-ai/cordis 4.0.4) with DSH's real tool registry
// (@deepseek-ai/dsh-tools 0.1.0-rc.8, the `ToolRuntime` service every dsh profile mounts as
// `tools`). Not an end-to-end test (test_dsh_e2e.py runs dsh itself): these reach what a turn
// cannot show, such as Cordis refusing a misspelled key, a stuck engine, the tools disposed with
// the plugin. The only stand-in is the `systemPrompt` service ToolRuntime's constructor calls.
// Line references are to the published packages: cordis@4.0.4 lib/index.js,
// dsh-tools@0.1.0-rc.8 lib/index.js, dsh-agent-loop@0.1.0-rc.8 lib/index.js.
// Run by test_dsh_contract.py with DSH_CONTRACT_MODULES (a node_modules holding those packages).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, chmodSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { test } from "node:test";

const HERE = dirname(fileURLToPath(import.meta.url));
const GOLDEN = join(HERE, "..", "..", "..", "crates", "skillsearch-core", "tests", "golden");
const BIN = process.env.SKILLSEARCH_BIN;
const MODS = process.env.DSH_CONTRACT_MODULES;
assert.ok(BIN && MODS, "SKILLSEARCH_BIN and DSH_CONTRACT_MODULES must be set");
const req = createRequire(join(MODS, "resolve.js"));
const load = (name) => import(pathToFileURL(req.resolve(name)).href);
const { Context, Service } = await load("@deepseek-ai/cordis");
const { default: ToolRuntime } = await load("@deepseek-ai/dsh-tools");
const plugin = await import("../plugin/index.js");

const FACT = "MARIGOLD-QX-7731";
const QUESTION = "what is our internal template name for quarterly decks";
const UNRELATED = "hello there, how are you feeling";
const dir = mkdtempSync(join(tmpdir(), "ss-dsh-"));
const skills = join(dir, "skills");
mkdirSync(join(skills, "quarterly-decks"), { recursive: true });
writeFileSync(
  join(skills, "quarterly-decks", "SKILL.md"),
  `---\nname: quarterly-decks\ndescription: Build the quarterly business review slide deck with our internal template.\n---\n\nOur internal template name for quarterly decks is ${FACT}.\n`,
);
let n = 0;
const config = (over = {}) => ({ binary: BIN, skills: [skills], home: join(dir, `home-${n++}`), deadline_ms: 20000, ...over });

/** Stand-in for dsh-system-prompt: ToolRuntime's constructor calls `systemPrompt.tools(fn)`
 *  (dsh-tools lib/index.js:2591-2597) and nothing else in native mode. */
class SystemPrompt extends Service {
  constructor(ctx) {
    super(ctx, "systemPrompt");
  }
  tools() {}
  section() {}
}

/** A root context with the `tools` service as dsh-base mounts it, and what its logger said at
 *  any level (cordis LoggerService: an exporter's `levels.default` above the message's level,
 *  lib/index.js:474-484 and :613-619). */
async function host({ tools = true } = {}) {
  const root = new Context();
  const said = [];
  root.logger.exporter({ levels: { default: 3 }, export: (m) => said.push(JSON.stringify(m)) });
  if (tools) {
    await root.plugin(SystemPrompt);
    await root.plugin(ToolRuntime, {});
  }
  return { root, said };
}

/** What cordis-plugin-loader does with a row (loader lib/index.js:451-461: import the module,
 *  `unwrapExports` :664-669, `registry.plugin(plugin, config)`), and wait for `apply`. */
async function mount(root, cfg) {
  const fiber = root.plugin({ ...plugin }, cfg);
  await fiber;
  return fiber;
}

function msg(text) {
  return plugin.userMessage(text);
}

async function preStep(root, messages, inner) {
  // dsh-agent-loop lib/index.js:501-507: the waterfall's innermost `next` enters the claimed
  // messages (plus the runtime context); listeners see `{messages, turn, step, signal}`.
  const signal = new AbortController().signal;
  return root.waterfall("agent/pre-step", { messages, turn: 1, step: 1, signal }, inner ?? (async () => ({ kind: "enter", messages })));
}

test("config is checked by Cordis through Config['~standard'], naming the key (cordis lib/index.js:956-961)", async () => {
  const { root } = await host({ tools: false });
  let error;
  try {
    await root.plugin({ ...plugin }, config({ mode: "atuo", moode: 1 }));
  } catch (e) {
    error = e;
  }
  const text = String(error?.message ?? error);
  assert.match(text, /skillsearch\.mode: "atuo" is not one of "on_demand", "auto"/);
  assert.match(text, /unknown key "moode"/);
  assert.deepEqual(plugin.configIssues({ deadline_ms: 0 }).map((i) => i.path), [["deadline_ms"]]);
  assert.deepEqual(plugin.settingsOf(undefined, { HOME: "/h" }).skills, ["/h/.dsh/skills"]);
  assert.equal(plugin.settingsOf(undefined, {}).mode, "on_demand");
});

test("on_demand registers the engine's tools on the real ToolRuntime and they answer", async () => {
  // dsh-tools lib/index.js:2762-2771 (`register`: output {schema, render}, positive timeoutMs),
  // `schemas()` / `execute({callId, name, arguments, signal})`.
  const { root } = await host();
  await mount(root, config());
  const schemas = root.tools.schemas();
  const ours = schemas.filter((s) => s.name.startsWith("skill_"));
  assert.deepEqual(ours.map((s) => s.name).sort(), ["skill_read", "skill_search"]);
  for (const s of ours) {
    assert.equal(s.description.trim(), readFileSync(join(GOLDEN, `${s.name}.description.txt`), "utf8").trim());
    assert.deepEqual(s.parameters, JSON.parse(readFileSync(join(GOLDEN, `${s.name}.schema.json`), "utf8")));
  }
  const signal = new AbortController().signal;
  const r = await root.tools.execute({ callId: "c1", name: "skill_search", arguments: { query: QUESTION }, signal });
  assert.equal(r.isError, false);
  assert.match(r.content.map((b) => b.text).join(""), new RegExp(FACT));
  const read = await root.tools.execute({ callId: "c2", name: "skill_read", arguments: { id: "local/quarterly-decks" }, signal });
  assert.match(read.content.map((b) => b.text).join(""), new RegExp(FACT));
  const miss = await root.tools.execute({ callId: "c3", name: "skill_search", arguments: { query: UNRELATED }, signal });
  assert.match(miss.content[0].text, /^No skill in the library matches/);
});

test("the tools go away with the plugin, and a composition without `tools` still loads", async () => {
  const { root } = await host();
  const fiber = await mount(root, config());
  assert.ok(root.tools.schemas().some((s) => s.name === "skill_search"));
  await fiber.dispose();
  assert.ok(!root.tools.schemas().some((s) => s.name === "skill_search"));
  const bare = await host({ tools: false });
  await mount(bare.root, config());
});

test("auto appends the block for the user's message on agent/pre-step, after next()", async () => {
  const { root } = await host();
  await mount(root, config({ mode: "auto" }));
  assert.ok(!root.tools.schemas().some((s) => s.name.startsWith("skill_")));
  const user = msg(QUESTION);
  const runtime = Object.freeze({ role: "user", content: [{ type: "text", text: "<runtime context>" }], source: { kind: "runtime" } });
  const d = await preStep(root, [user], async () => ({ kind: "enter", messages: [user, runtime] }));
  assert.equal(d.kind, "enter");
  assert.equal(d.messages.length, 3);
  assert.equal(d.messages[0], user);
  assert.equal(d.messages[1], runtime);
  const added = d.messages[2];
  assert.equal(added.role, "user");
  assert.deepEqual(added.source, { kind: "plugin", plugin: "skillsearch" });
  assert.ok(Object.isFrozen(added) && typeof added.id === "string");
  assert.match(added.content[0].text, new RegExp(FACT));
  const rejected = await preStep(root, [user], async () => ({ kind: "reject" }));
  assert.deepEqual(rejected, { kind: "reject" });
  const small = await preStep(root, [msg(UNRELATED)]);
  assert.equal(small.messages.length, 1);
  const afterTool = await preStep(root, []);
  assert.deepEqual(afterTool.messages, []);
});

test("fails open: a missing binary leaves no tools and steps unchanged; a stuck one costs the deadline", async () => {
  const missing = join(dir, "no-such-skillsearch");
  const a = await host();
  await mount(a.root, config({ binary: missing }));
  assert.ok(!a.root.tools.schemas().some((s) => s.name.startsWith("skill_")));
  const b = await host();
  await mount(b.root, config({ binary: missing, mode: "auto" }));
  const user = msg(QUESTION);
  assert.deepEqual((await preStep(b.root, [user])).messages, [user]);
  assert.deepEqual((await preStep(b.root, [user])).messages, [user]);
  // Said on the host's logger, once per cause.
  assert.match(a.said.join("\n"), /the engine is not answering[^"]*DSH gets no skill tools/);
  // A spawn failure is reported by Node a moment later; the reason then appears once per cause.
  for (let i = 0; i < 40 && !b.said.length; i++) await new Promise((r) => setTimeout(r, 50));
  await preStep(b.root, [user]);
  const causes = b.said.map((m) => JSON.parse(m).args.join(" "));
  assert.equal(causes.length, 1, causes.join("\n"));
  assert.match(causes[0], /cannot run .*no-such-skillsearch.*this turn goes on without skills/);

  const stuck = join(dir, "stuck-skillsearch");
  writeFileSync(stuck, "#!/bin/sh\nexec sleep 30\n");
  chmodSync(stuck, 0o755);
  const c = await host();
  await mount(c.root, config({ binary: stuck, mode: "auto", deadline_ms: 300 }));
  const started = Date.now();
  assert.deepEqual((await preStep(c.root, [user])).messages, [user]);
  assert.ok(Date.now() - started < 300 + plugin.MARGIN_MS + 700, `${Date.now() - started} ms`);
  for (const e of globalThis.__skillsearchDsh.values()) e.stop();
});

test("the unavailable reply is the engine's golden text, and the client is OpenClaw's engine.js", () => {
  const replies = readFileSync(join(GOLDEN, "replies.txt"), "utf8").split("\n");
  assert.ok(replies.includes(plugin.UNAVAILABLE_REPLY));
  const ours = readFileSync(join(HERE, "..", "plugin", "engine.js"), "utf8");
  assert.equal(ours, readFileSync(join(HERE, "..", "..", "openclaw", "engine.js"), "utf8"));
});
