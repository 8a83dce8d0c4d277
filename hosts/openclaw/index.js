// skillsearch for OpenClaw. One plugin for every seam the host offers:
//  - a context engine (2026.8+, slot `plugins.slots.contextEngine`) whose assemble() puts the
//    retrieved skills in the system prompt in `auto` mode and records the turn's tool set;
//  - a `before_prompt_build` hook that narrows the turn's tools (`toolsAllow`) to what the
//    matched skills activate, and injects skills through `prependContext` when no context
//    engine ran (OpenClaw <= 2026.7, or the slot names another engine);
//  - the `skill_search` and `skill_read` tools in `on_demand` mode, kept out of Tool Search.
// All work is done by one warm `skillsearch serve --stdio` child (engine.js). Nothing here can
// fail a turn: every engine call resolves to null on trouble and the turn goes on.

import { existsSync, readFileSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Engine, HttpEngine, engineEnv } from "./engine.js";

const PLUGIN_ID = "skillsearch";
const HERE = dirname(fileURLToPath(import.meta.url));
/** Plugin-only keys; every other config key is a skillsearch setting, forwarded to the engine. */
const PLUGIN_KEYS = new Set(["binary", "home", "url", "token"]);
const MAX_SESSIONS = 512;
const MAX_COMMITTED = 4096;

/** Module state, shared by the several register() calls a host process makes. */
const state = (globalThis.__skillsearchOpenClaw ??= {
  engines: new Map(),
  sessions: new Map(),
  committed: new Set(),
});

function remember(map, key, value, max) {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value);
}

function session(key) {
  const k = key || "default";
  let s = state.sessions.get(k);
  if (!s) {
    s = { returned: new Set(), assembled: null, availableTools: null };
    remember(state.sessions, k, s, MAX_SESSIONS);
  }
  return s;
}

/** OpenClaw's own skill roots for a workspace, highest precedence first (hosts doc §8). */
export function openclawSkillRoots(config, workspaceDir, env = process.env) {
  const stateDir = env.OPENCLAW_STATE_DIR || join(env.HOME || homedir(), ".openclaw");
  const roots = [];
  if (workspaceDir) roots.push(join(workspaceDir, "skills"), join(workspaceDir, ".agents", "skills"));
  if (!env.OPENCLAW_STATE_DIR) roots.push(join(env.HOME || homedir(), ".agents", "skills"));
  roots.push(join(stateDir, "skills"));
  const pkg = openclawPackageDir();
  if (pkg) roots.push(join(pkg, "skills"), join(pkg, "custodian-skills"));
  for (const d of config?.skills?.load?.extraDirs ?? []) roots.push(d);
  roots.push(join(stateDir, "plugin-skills"));
  return roots.filter((r, i) => roots.indexOf(r) === i && existsSync(r));
}

/** Plugin directories whose manifests say which tools each plugin owns. */
export function openclawPluginDirs(config, env = process.env) {
  const stateDir = env.OPENCLAW_STATE_DIR || join(env.HOME || homedir(), ".openclaw");
  const dirs = [];
  for (const p of config?.plugins?.load?.paths ?? []) dirs.push(p);
  const ext = join(stateDir, "extensions");
  if (existsSync(ext)) dirs.push(ext);
  const pkg = openclawPackageDir();
  if (pkg && existsSync(join(pkg, "dist", "extensions"))) dirs.push(join(pkg, "dist", "extensions"));
  return dirs.filter((d, i) => dirs.indexOf(d) === i && existsSync(d));
}

let pkgDir;
function openclawPackageDir() {
  if (pkgDir !== undefined) return pkgDir;
  pkgDir = null;
  // The running CLI is <pkg>/openclaw.mjs or <pkg>/dist/…; walk up to its package.json.
  for (let d = dirname(process.argv[1] || ""); d && d !== dirname(d); d = dirname(d)) {
    try {
      if (JSON.parse(readFileSync(join(d, "package.json"), "utf8")).name === "openclaw") {
        pkgDir = d;
        break;
      }
    } catch {}
  }
  return pkgDir;
}

function findBinary(cfg) {
  if (cfg.binary) return cfg.binary;
  for (const d of (process.env.PATH || "").split(":")) {
    if (d && existsSync(join(d, "skillsearch"))) return join(d, "skillsearch");
  }
  return "skillsearch";
}

function engineFor(api, cfg) {
  const settings = {};
  for (const [k, v] of Object.entries(cfg)) if (!PLUGIN_KEYS.has(k)) settings[k] = v;
  if (!settings.plugins?.length) settings.plugins = openclawPluginDirs(api.config);
  const binary = findBinary(cfg);
  const env = engineEnv(process.env, settings);
  if (cfg.home) env.SKILLSEARCH_HOME = cfg.home;
  const key = JSON.stringify([binary, env.SKILLSEARCH_HOME, settings, cfg.url ?? ""]);
  let e = state.engines.get(key);
  if (!e) {
    const deadline = Number(cfg.deadline_ms ?? 8000);
    e = cfg.url
      ? new HttpEngine({ url: cfg.url, token: cfg.token, timeoutMs: deadline + 500, log: api.logger })
      : new Engine({ binary, env, timeoutMs: deadline + 500, log: api.logger });
    state.engines.set(key, e);
  }
  return e;
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === "string" ? p : p?.text ?? "")).join("\n");
  return "";
}

function estimateTokens(messages) {
  let chars = 0;
  for (const m of messages ?? []) chars += textOf(m?.content).length;
  return Math.ceil(chars / 4);
}

function loadToolDefs() {
  try {
    return JSON.parse(readFileSync(join(HERE, "tools.json"), "utf8"));
  } catch {
    return null;
  }
}

export default {
  id: PLUGIN_ID,
  name: "skillsearch",
  description: "The few skills and plugin tools each turn needs, from a warm local engine",
  register(api) {
    const cfg = { ...(api.pluginConfig ?? {}) };
    const mode = cfg.mode ?? "on_demand";
    const engine = () => engineFor(api, cfg);
    const roots = (workspaceDir) =>
      cfg.skills?.length ? cfg.skills : openclawSkillRoots(api.config, workspaceDir);
    // `workspace` is the agent's workspace: `{{OUTPUT_DIR}}` when placeholders are resolved.
    const request = (workspaceDir, extra) => ({
      skills: roots(workspaceDir),
      host: "openclaw",
      ...(workspaceDir && isAbsolute(workspaceDir) ? { workspace: workspaceDir } : {}),
      ...extra,
    });

    // OpenClaw tells the turn's tool list only to the context engine (2026.8+, when the slot is
    // ours); otherwise the gate runs without it and the decision log says why.
    const NO_TOOLS =
      "OpenClaw gives the tool list only to the context engine: plugins.slots.contextEngine is not skillsearch, or OpenClaw is older than 2026.8";
    const tools = (availableTools) =>
      availableTools ? { available_tools: availableTools } : { tools_unknown: NO_TOOLS };

    async function retrieve(query, workspaceDir, availableTools) {
      if (!query?.trim()) return null;
      return engine().call("retrieve", request(workspaceDir, { query, mode: "auto", ...tools(availableTools) }));
    }

    let sdk = null;
    const sdkReady = import("openclaw/plugin-sdk/core").then((m) => (sdk = m)).catch(() => null);

    if (typeof api.registerContextEngine === "function") {
      api.registerContextEngine(PLUGIN_ID, (ctx) => ({
        info: {
          id: PLUGIN_ID,
          name: "skillsearch",
          ownsCompaction: false,
          transcriptSemantics: {
            currentTurnFence: "before-current-turn-entry-v1",
            turnAdvancementIdempotency: "atomic-idempotent-v1",
          },
        },
        async ingest() {
          return { ingested: false };
        },
        async assemble(params) {
          const s = session(params.sessionKey || params.sessionId);
          const tools = params.availableTools ? [...params.availableTools] : null;
          s.availableTools = tools;
          let addition = "";
          await sdkReady;
          try {
            addition =
              sdk?.buildMemorySystemPromptAddition?.({
                availableTools: params.availableTools ?? new Set(),
                citationsMode: params.citationsMode,
                agentSessionKey: params.sessionKey,
              }) ?? "";
          } catch {}
          s.assembled = { prompt: params.prompt ?? "", hits: [] };
          if (mode === "auto") {
            const r = await retrieve(params.prompt, ctx?.workspaceDir, tools);
            if (r?.text) {
              addition = addition ? `${addition}\n\n${r.text}` : r.text;
              s.assembled.hits = (r.hits ?? []).map((h) => h.id);
            }
          }
          const out = { messages: params.messages, estimatedTokens: estimateTokens(params.messages) };
          if (addition) out.systemPromptAddition = addition;
          return out;
        },
        async compact(params) {
          await sdkReady;
          if (sdk?.delegateCompactionToRuntime) return sdk.delegateCompactionToRuntime(params);
          return { ok: false, compacted: false, reason: "skillsearch could not reach the runtime compactor" };
        },
        async commitTurn({ advancementKey }) {
          if (advancementKey && state.committed.has(advancementKey)) return { status: "duplicate" };
          if (advancementKey) {
            state.committed.add(advancementKey);
            while (state.committed.size > MAX_COMMITTED) state.committed.delete(state.committed.values().next().value);
          }
          return { status: "committed" };
        },
      }));
    }

    api.on("before_prompt_build", async (event, ctx) => {
      const s = session(ctx?.sessionKey || ctx?.sessionId);
      const prompt = event?.prompt ?? "";
      const result = {};
      let matched = null;
      // The context engine already ran for this turn when it saw the same prompt.
      const assembled = s.assembled && s.assembled.prompt === prompt ? s.assembled : null;
      s.assembled = null;
      if (mode === "auto") {
        if (assembled) matched = assembled.hits;
        else {
          const r = await retrieve(prompt, ctx?.workspaceDir, s.availableTools);
          if (r?.text) result.prependContext = r.text;
          matched = (r?.hits ?? []).map((h) => h.id);
        }
      } else {
        matched = [...s.returned];
      }
      // Narrow the tools only when the full tool set is known; when unsure, show every tool.
      if (s.availableTools?.length) {
        const plan = await engine().call(
          "plan",
          request(ctx?.workspaceDir, { matched, tools: s.availableTools }),
        );
        if (Array.isArray(plan?.visible_tools) && plan.hidden_tools?.length) {
          result.toolsAllow = plan.visible_tools;
        }
      }
      return Object.keys(result).length ? result : undefined;
    });

    if (mode === "on_demand") {
      const defs = loadToolDefs();
      if (!defs) {
        api.logger?.warn?.(
          "skillsearch: tools.json is missing beside the plugin; run `skillsearch setup openclaw` again",
        );
      } else {
        api.registerTool(
          (ctx) =>
            defs.map((d) => ({
              name: d.name,
              label: d.name,
              description: d.description,
              parameters: d.parameters,
              catalogMode: "direct-only",
              async execute(_id, params) {
                const s = session(ctx?.sessionKey || ctx?.sessionId);
                const ws = ctx?.workspaceDir;
                let text;
                if (d.name === "skill_read") {
                  const offset = Number.parseInt(params?.offset ?? 0, 10);
                  const r = await engine().call(
                    "read",
                    request(ws, { id: String(params?.id ?? ""), path: params?.path, offset: offset > 0 ? offset : 0 }),
                  );
                  text = r?.text ?? d.unavailable;
                  if (r?.text && params?.id) s.returned.add(String(params.id));
                } else {
                  const detail = params?.detail ? { detail: String(params.detail) } : {};
                  const r = await engine().call(
                    "search",
                    request(ws, { query: String(params?.query ?? ""), ...detail, ...tools(s.availableTools) }),
                  );
                  text = r?.text ?? d.unavailable;
                  for (const h of r?.hits ?? []) s.returned.add(h.id);
                }
                return { content: [{ type: "text", text }], details: {} };
              },
            })),
          { names: defs.map((d) => d.name) },
        );
      }
    }
  },
};
