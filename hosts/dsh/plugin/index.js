// skillsearch for DeepSeek Harness (DSH): a Cordis plugin, enabled by a row that
// `skillsearch setup dsh` inserts into `$DSH_HOME/cordis.patch.yml`.
//  - on_demand: `skill_search` and `skill_read` registered on the `tools` service (scoped with
//    `ctx.inject(['tools'], …)`, so a composition without one still loads); their names,
//    descriptions and parameter schemas come from the engine (its `tools` request);
//  - auto: an `agent/pre-step` listener that, once the rest of the waterfall let the step in,
//    appends the rendered skills block for the user's message as one more user message.
// All work is done by one warm `skillsearch serve --stdio` child per process (engine.js, the
// client the OpenClaw plugin uses). Nothing here can fail a turn: a missing binary, a killed or
// stuck engine or a passed deadline costs the turn its skills, and the log says why once.
// The plugin imports nothing from DSH: Cordis checks `Config` through its Standard Schema
// interface (`Config["~standard"].validate`), and a user message is plain frozen data.

import { randomUUID } from "node:crypto";
import { Engine, engineEnv } from "./engine.js";

export const name = "skillsearch";
// Nothing is required at load; the tools are registered only where a `tools` service exists.
export const inject = [];

const MODES = ["on_demand", "auto"];
const KEYS = {
  binary: "a path to the skillsearch binary",
  mode: `one of ${MODES.map((m) => `"${m}"`).join(", ")}`,
  skills: "a list of skill directories",
  home: "skillsearch's home directory",
  deadline_ms: "a whole number of milliseconds, at least 1",
};
export const DEFAULT_DEADLINE_MS = 5000;
/** What the client waits beyond the engine's own deadline before it gives up on a reply. */
export const MARGIN_MS = 500;
/** Waiting for the engine's tool list (no index involved). */
const TOOLS_WAIT_MS = 3000;
const HOST = "dsh";
const SOURCE = Object.freeze({ kind: "plugin", plugin: "skillsearch" });
/** `skill_search`'s reply when the engine cannot answer: the engine's own fixed reply, pinned
 *  against the golden file by the tests. */
export const UNAVAILABLE_REPLY = "Skill search is unavailable right now. Proceed without a skill.";
const NO_TOOLS = "the DSH tools service listed no tools for this agent";

/** Every problem with a config, each naming the key (`skillsearch.<key>` in cordis.patch.yml). */
export function configIssues(value) {
  if (value === undefined || value === null) return [];
  if (typeof value !== "object" || Array.isArray(value)) {
    return [{ message: "skillsearch: the plugin config must be a mapping", path: [] }];
  }
  const issues = [];
  const bad = (key, v) =>
    issues.push({ message: `skillsearch.${key}: ${JSON.stringify(v)} is not ${KEYS[key]}`, path: [key] });
  for (const [k, v] of Object.entries(value)) {
    if (!(k in KEYS)) {
      issues.push({
        message: `skillsearch: unknown key "${k}"; accepted: ${Object.keys(KEYS).join(", ")}`,
        path: [k],
      });
    } else if (v === undefined || v === null) {
      continue;
    } else if (k === "mode" && !MODES.includes(v)) bad(k, v);
    else if ((k === "binary" || k === "home") && (typeof v !== "string" || v === "")) bad(k, v);
    else if (k === "skills" && !(Array.isArray(v) && v.every((s) => typeof s === "string" && s !== ""))) bad(k, v);
    else if (k === "deadline_ms" && !(Number.isInteger(v) && v >= 1)) bad(k, v);
  }
  return issues;
}

/** The config with defaults filled in (after `configIssues` found nothing). */
export function settingsOf(value, env = process.env) {
  const c = value ?? {};
  const home = env.DSH_HOME?.trim() || `${env.HOME ?? ""}/.dsh`;
  return {
    binary: c.binary ?? "skillsearch",
    mode: c.mode ?? "on_demand",
    skills: c.skills ?? [`${home}/skills`],
    home: c.home ?? null,
    deadline_ms: c.deadline_ms ?? DEFAULT_DEADLINE_MS,
  };
}

/** The plugin's config schema, as Cordis reads it (Standard Schema v1; schemastery implements
 *  the same interface). Invalid config fails the plugin at load, naming the key. */
export const Config = {
  "~standard": {
    version: 1,
    vendor: "skillsearch",
    validate(value) {
      const issues = configIssues(value);
      return issues.length ? { issues } : { value: value ?? {} };
    },
  },
};

/** Logs each distinct message once per process. */
function onceLogger(logger) {
  const said = new Set();
  const say = (level) => (msg) => {
    if (said.has(msg)) return;
    said.add(msg);
    try {
      (logger?.[level] ?? logger?.warn ?? console.warn).call(logger, msg);
    } catch {
      console.warn(msg);
    }
  };
  return { warn: say("warn"), debug: () => {} };
}

/** The one engine per configuration in this process. */
const engines = (globalThis.__skillsearchDsh ??= new Map());

export function engineFor(settings, log) {
  const args = [];
  if (settings.home) args.push("--home", settings.home);
  args.push("serve", "--stdio", "--mode", settings.mode);
  for (const s of settings.skills) args.push("--skills", s);
  const key = JSON.stringify([settings.binary, args, settings.deadline_ms]);
  let e = engines.get(key);
  if (!e) {
    const env = engineEnv(process.env, { deadline_ms: settings.deadline_ms });
    e = new Engine({ binary: settings.binary, args, env, timeoutMs: settings.deadline_ms + MARGIN_MS, log });
    engines.set(key, e);
  }
  return e;
}

/** The text of the latest user message that has any. */
export function latestUserText(messages) {
  for (let i = (messages?.length ?? 0) - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role !== undefined && m.role !== "user") continue;
    const content = m?.content;
    const text =
      typeof content === "string"
        ? content
        : Array.isArray(content)
          ? content.filter((b) => b?.type === "text" && typeof b.text === "string").map((b) => b.text).join("\n")
          : "";
    if (text.trim()) return text;
  }
  return "";
}

/** A frozen user message in DSH's shape (`createUserMessage` of dsh-llm: role, content, source,
 *  id). */
export function userMessage(text) {
  const block = Object.freeze({ type: "text", text });
  return Object.freeze({ role: "user", content: Object.freeze([block]), source: SOURCE, id: randomUUID() });
}

/** The tool names the `tools` service shows this agent, or null when it cannot say. */
function agentTools(ctx, agent) {
  try {
    const schemas = ctx.get?.("tools")?.schemas?.(agent);
    if (!Array.isArray(schemas)) return null;
    return schemas.map((s) => s?.name ?? s?.function?.name).filter((n) => typeof n === "string");
  } catch {
    return null;
  }
}

/** One engine tool as a DSH tool definition (what `ctx.tools.register` takes). */
export function toolDefinition(spec, engine, settings) {
  return {
    name: spec.name,
    description: spec.description,
    parameters: spec.parameters,
    output: {
      schema: {
        type: "object",
        properties: { text: { type: "string" } },
        required: ["text"],
        additionalProperties: false,
      },
      render: (_args, value) => [{ type: "text", text: String(value?.text ?? "") }],
    },
    timeoutMs: settings.deadline_ms + 2 * MARGIN_MS,
    async execute(args) {
      const a = args && typeof args === "object" ? args : {};
      let params;
      if (spec.name === "skill_search") {
        params = { query: String(a.query ?? ""), host: HOST, tools_unknown: NO_TOOLS };
        if (a.detail) params.detail = String(a.detail);
      } else {
        params = { id: String(a.id ?? ""), host: HOST };
        if (a.path) params.path = String(a.path);
        const offset = Number.parseInt(String(a.offset ?? "0"), 10);
        if (Number.isFinite(offset) && offset > 0) params.offset = offset;
      }
      const r = await engine.call(spec.name === "skill_search" ? "search" : "read", params);
      return { text: r?.text ?? UNAVAILABLE_REPLY };
    },
  };
}

/** Cordis entry point. An async function: Cordis awaits it (and never calls it with `new`). */
export async function apply(ctx, config) {
  const log = onceLogger(ctx.logger);
  const settings = settingsOf(config);
  const engine = engineFor(settings, log);

  if (settings.mode === "on_demand") {
    const r = await engine.call("tools", {}, TOOLS_WAIT_MS);
    const specs = (r?.tools ?? []).filter((t) => t && typeof t.name === "string");
    if (!specs.length) {
      log.warn(
        `skillsearch: the engine is not answering (${engine.lastError ?? "no tools"}); DSH gets no skill tools. Run \`skillsearch doctor dsh\``,
      );
      return;
    }
    ctx.inject(["tools"], (c) => {
      for (const spec of specs) c.tools.register(toolDefinition(spec, engine, settings));
    });
    return;
  }

  // auto: open the index now, so the first turn finds it warm (a failure is logged by the
  // engine client, once per cause).
  engine.call("warm", {});
  ctx.on("agent/pre-step", async (payload, next) => {
    const decision = await next();
    if (decision?.kind !== "enter") return decision;
    // The query is what the user sent (the messages claimed from the inbox for this step), not
    // the runtime context the loop appends to the decision; a step with none (after a tool
    // call) gets nothing.
    const query = latestUserText(payload?.messages);
    if (!query.trim()) return decision;
    payload?.signal?.throwIfAborted?.();
    const tools = agentTools(ctx, payload?.agent);
    const params = { query, mode: "auto", host: HOST };
    if (tools) params.available_tools = tools;
    else params.tools_unknown = NO_TOOLS;
    const r = await engine.call("retrieve", params);
    payload?.signal?.throwIfAborted?.();
    if (!r?.text) return decision;
    return { kind: "enter", messages: [...decision.messages, userMessage(r.text)] };
  });
}
