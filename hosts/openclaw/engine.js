// One warm skillsearch engine per plugin process: a `skillsearch serve --stdio` child that this
// module owns, spoken to with newline-delimited JSON. Every call fails open: on a missing binary,
// a dead child, a bad reply or a passed deadline it resolves to null and the turn goes on.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

/** skillsearch config keys the plugin forwards, and the environment variables that carry them. */
export function envName(key) {
  if (key === "skills") return "SKILLSEARCH_SKILLS_DIRS";
  if (key === "plugins") return "SKILLSEARCH_PLUGINS_DIRS";
  return "SKILLSEARCH_" + key.toUpperCase();
}

/** The child's environment: the host's, without stray SKILLSEARCH_* (the engine rejects unknown
 *  ones), plus the plugin's settings. */
export function engineEnv(base, settings) {
  const env = {};
  for (const [k, v] of Object.entries(base)) {
    if (!k.startsWith("SKILLSEARCH_") || k === "SKILLSEARCH_HOME" || k === "SKILLSEARCH_CONFIG") env[k] = v;
  }
  for (const [k, v] of Object.entries(settings)) {
    if (v === undefined || v === null) continue;
    env[envName(k)] = Array.isArray(v) ? v.join(":") : String(v);
  }
  return env;
}

export class Engine {
  /**
   * @param {{binary: string, args?: string[], env?: object, timeoutMs: number, log?: object}} opts
   */
  constructor(opts) {
    this.opts = opts;
    this.child = null;
    this.pending = new Map();
    this.nextId = 1;
    this.lastError = null;
    this.restarts = 0;
  }

  start() {
    if (this.child) return this.child;
    const { binary, args = ["serve", "--stdio"], env } = this.opts;
    let child;
    try {
      child = spawn(binary, args, { env, stdio: ["pipe", "pipe", "pipe"] });
    } catch (e) {
      this.fail(`cannot start ${binary}: ${e.message}`);
      return null;
    }
    this.child = child;
    // The engine must never keep the host alive on its own.
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) s.unref?.();
    child.on("error", (e) => this.died(child, `cannot run ${binary}: ${e.message}`));
    child.on("exit", (code, signal) => this.died(child, `engine exited (${signal ?? code})`));
    child.stdin.on("error", () => {});
    child.stderr.on("data", (d) => {
      const text = String(d).trim();
      if (text) this.opts.log?.debug?.(`skillsearch: ${text}`);
    });
    createInterface({ input: child.stdout }).on("line", (line) => {
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        return;
      }
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      clearTimeout(p.timer);
      if (msg.error) {
        this.lastError = msg.error.message ?? String(msg.error);
        p.resolve(null);
      } else p.resolve(msg.result ?? null);
    });
    return child;
  }

  fail(message) {
    this.lastError = message;
    this.opts.log?.warn?.(`skillsearch: ${message}; this turn goes on without skills`);
  }

  died(child, message) {
    if (this.child !== child) return;
    this.child = null;
    this.restarts += 1;
    this.fail(message);
    for (const [, p] of this.pending) {
      clearTimeout(p.timer);
      p.resolve(null);
    }
    this.pending.clear();
  }

  /** Sends one request; resolves to the result, or null on any failure. */
  call(method, params, timeoutMs = this.opts.timeoutMs) {
    const child = this.start();
    if (!child || !child.stdin.writable) return Promise.resolve(null);
    const id = this.nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.fail(`${method} passed its ${timeoutMs} ms deadline`);
        resolve(null);
      }, timeoutMs);
      this.pending.set(id, { resolve, timer });
      try {
        child.stdin.write(JSON.stringify({ id, method, params }) + "\n");
      } catch (e) {
        this.pending.delete(id);
        clearTimeout(timer);
        this.fail(`cannot write to the engine: ${e.message}`);
        resolve(null);
      }
    });
  }

  stop() {
    if (this.child) {
      const c = this.child;
      this.child = null;
      c.kill();
    }
  }
}

/** The same calls against a running `skillsearch serve` daemon (`url`, optional bearer `token`). */
export class HttpEngine {
  constructor(opts) {
    this.opts = opts;
    this.lastError = null;
  }

  async call(method, params, timeoutMs = this.opts.timeoutMs) {
    const url = `${this.opts.url.replace(/\/+$/, "")}/v1/${method}`;
    const headers = { "content-type": "application/json" };
    if (this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
    try {
      const res = await fetch(url, {
        method: "POST",
        headers,
        body: JSON.stringify(params ?? {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = await res.json().catch(() => null);
      if (!res.ok || body === null) {
        this.fail(`${method} answered HTTP ${res.status}: ${body?.error ?? "no JSON"}`);
        return null;
      }
      return body;
    } catch (e) {
      this.fail(`${method} at ${url} failed: ${e.name === "TimeoutError" ? `no answer in ${timeoutMs} ms` : e.message}`);
      return null;
    }
  }

  fail(message) {
    this.lastError = message;
    this.opts.log?.warn?.(`skillsearch: ${message}; this turn goes on without skills`);
  }

  stop() {}
}
