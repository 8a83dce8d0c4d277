// The plugin's engine client against the real binary: answers, fails open, restarts, obeys its
// deadline, and speaks to a running daemon. Run by test_engine_client.py (node --test).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Engine, HttpEngine, engineEnv, envName } from "../engine.js";

const BIN = process.env.SKILLSEARCH_BIN;
const dir = mkdtempSync(join(tmpdir(), "ss-engine-"));
const skills = join(dir, "skills");
mkdirSync(join(skills, "quarterly-decks"), { recursive: true });
writeFileSync(
  join(skills, "quarterly-decks", "SKILL.md"),
  "---\nname: quarterly-decks\ndescription: Build the quarterly business review deck with our internal template\n---\nUse Aurora-QBR-v7 (AURORA-7731).\n",
);
const env = engineEnv({ PATH: process.env.PATH, HOME: dir, SKILLSEARCH_STRAY: "x" }, { skills: [skills], top_k: 2 });
env.SKILLSEARCH_HOME = join(dir, "home");
const query = { query: "quarterly business review deck template", mode: "auto" };

test("settings become the engine's environment, stray SKILLSEARCH_* dropped", () => {
  assert.equal(envName("skills"), "SKILLSEARCH_SKILLS_DIRS");
  assert.equal(envName("top_k"), "SKILLSEARCH_TOP_K");
  assert.equal(env.SKILLSEARCH_SKILLS_DIRS, skills);
  assert.equal(env.SKILLSEARCH_STRAY, undefined);
});

test("answers, and a killed engine is restarted on the next call", async () => {
  const e = new Engine({ binary: BIN, env, timeoutMs: 20000 });
  const r = await e.call("retrieve", query);
  assert.match(r.text, /AURORA-7731/);
  e.child.kill("SIGKILL");
  await new Promise((res) => setTimeout(res, 200));
  const again = await e.call("retrieve", query);
  assert.match(again.text, /AURORA-7731/);
  assert.equal(e.restarts, 1);
  e.stop();
});

test("a missing binary resolves to null and says why", async () => {
  const e = new Engine({ binary: join(dir, "no-such-skillsearch"), env, timeoutMs: 2000 });
  assert.equal(await e.call("retrieve", query), null);
  assert.match(e.lastError, /no-such-skillsearch|ENOENT/);
});

test("an engine that never answers is abandoned at the deadline", async () => {
  const stuck = join(dir, "stuck");
  writeFileSync(stuck, "#!/bin/sh\nexec sleep 30\n");
  chmodSync(stuck, 0o755);
  const e = new Engine({ binary: stuck, env, timeoutMs: 300 });
  const t = Date.now();
  assert.equal(await e.call("retrieve", query), null);
  assert.ok(Date.now() - t < 2000);
  assert.match(e.lastError, /deadline/);
  e.stop();
});

test("a running daemon answers through url", async () => {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const d = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--skills", skills], { env, stdio: "ignore" });
  try {
    const h = new HttpEngine({ url: `http://127.0.0.1:${port}`, timeoutMs: 5000 });
    let r = null;
    for (let i = 0; i < 50 && !r; i++) {
      r = await h.call("retrieve", query);
      if (!r) await new Promise((res) => setTimeout(res, 100));
    }
    assert.match(r.text, /AURORA-7731/);
    const down = new HttpEngine({ url: "http://127.0.0.1:9", timeoutMs: 1000 });
    assert.equal(await down.call("retrieve", query), null);
    assert.ok(down.lastError);
  } finally {
    d.kill();
  }
});
