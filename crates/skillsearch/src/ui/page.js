// skillsearch ui: reads the JSON routes of the binary that served it and draws everything
// here (plots are inline SVG). Data is only ever inserted as text, never as markup. The
// address keeps the page's state (?q=&host=&mode=&surface=&since=&until=&page=) so it can be
// linked.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const state = new URLSearchParams(location.search);

// ---------------------------------------------------------------- helpers

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// A legend's colour key (an SVG square: the page's policy allows no inline styles).
function swatch(color) {
  return svg("svg", { class: "swatch", width: 12, height: 12, viewBox: "0 0 12 12" }, svg("rect", { width: 12, height: 12, fill: color }));
}

function fill(id, ...children) {
  const target = document.getElementById(id);
  target.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
  return target;
}

const fmt = (n, digits = 0) =>
  Number(n).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

function token() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("skillsearch-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("skillsearch-token");
}

class ApiError extends Error {}

async function api(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== "") q.set(k, v);
  const headers = {};
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const r = await fetch(path + (q.toString() ? "?" + q : ""), { headers });
  let body = null;
  try { body = await r.json(); } catch (_) { body = null; }
  if (r.status === 401) {
    document.getElementById("auth").hidden = false;
    document.getElementById("auth-message").textContent = body && body.error ? body.error : "token needed";
  }
  if (!r.ok) throw new ApiError(body && body.error ? body.error : `${path}: HTTP ${r.status}`);
  return body;
}

function failed(id, e) {
  fill(id, el("p", { class: "error" }, e.message || String(e)));
}

function keep() {
  const q = state.toString();
  history.replaceState(null, "", location.pathname + (q ? "?" + q : "") + location.hash);
}

// ---------------------------------------------------------------- search

async function search() {
  const q = state.get("q") || "";
  document.getElementById("q").value = q;
  if (!q.trim()) { fill("search-out"); return; }
  fill("search-out", el("p", { class: "muted" }, "searching…"));
  try {
    const a = await api("/api/search", { q });
    const ex = a.explanation;
    const hits = ex.skills.filter((s) => s.status === "hit");
    const injected = new Set(ex.turn.injected || []);
    const rows = hits.map((s) =>
      el("tr", { class: "hit" },
        el("td", { class: "num" }, s.rank),
        el("td", {}, el("strong", {}, s.name), " ", el("span", { class: "muted" }, s.qualified_id)),
        el("td", { class: "num" }, s.score == null ? "" : fmt(s.score, 4)),
        el("td", {}, injected.has(s.qualified_id)
          ? el("span", { class: "tag good" }, "injected in auto mode")
          : el("span", { class: "tag" }, "not injected"))));
    const held = ex.skills.filter((s) => s.status !== "hit" && s.held_back);
    fill("search-out",
      el("p", {}, hits.length ? `${hits.length} hit${hits.length > 1 ? "s" : ""} for “${a.query}” ` : `No hits for “${a.query}” `,
        el("span", { class: "muted" }, `(${ex.retrievers.join(" + ") || "no retriever"}, ${fmt(a.elapsed_ms, 1)} ms)`)),
      hits.length ? el("table", { id: "search-hits" },
        el("thead", {}, el("tr", {}, el("th", { class: "num" }, "rank"), el("th", {}, "skill"), el("th", { class: "num" }, "score"), el("th", {}, "turn"))),
        el("tbody", {}, rows)) : null,
      held.length ? el("p", {}, "Held back: ", held.map((s) => el("span", { class: "tag bad" }, `${s.qualified_id}: ${s.held_back.reason}`))) : null,
      el("h3", {}, "Why"),
      el("pre", { class: "explain", id: "explain-text" }, a.text.join("\n")));
  } catch (e) { failed("search-out", e); }
}

// ---------------------------------------------------------------- turns

// A filter's choices: every value the log holds, with its count. A turn that recorded none (an
// MCP tool call names no host) is chosen as "-", as the API takes it.
function options(id, facets, chosen) {
  const s = document.getElementById(id);
  const value = (name) => name || "-";
  s.replaceChildren(el("option", { value: "" }, "all"),
    ...facets.map((f) => el("option", { value: value(f.name), selected: value(f.name) === chosen }, `${f.name || "(none)"} (${fmt(f.turns)})`)));
  if (chosen && !facets.some((f) => value(f.name) === chosen)) s.append(el("option", { value: chosen, selected: true }, chosen));
}

const FILTERS = [["host", "f-host"], ["mode", "f-mode"], ["surface", "f-surface"], ["since", "f-since"], ["until", "f-until"]];

function filters() {
  return Object.fromEntries(FILTERS.map(([k]) => [k, state.get(k)]));
}

function found(d) {
  if (d.tools) {
    return `${d.tools.visible.length} tools shown, ${d.tools.hidden.length} hidden` +
      (d.tools.activated_plugins.length ? ` (activated: ${d.tools.activated_plugins.join(", ")})` : "");
  }
  if (!d.hits || !d.hits.length) return el("span", { class: "muted" }, d.mode === "on_demand" ? "nothing (tools offered)" : "nothing");
  return d.hits.map((h) => el("span", { class: "tag" }, h.id));
}

// The turn's error, then what its stages noted (a remote step that failed, retrieval that
// stayed lexical).
function failures(d) {
  const out = [];
  if (d.error) out.push(el("span", { class: "tag bad" }, d.error));
  for (const n of d.diagnostics || []) out.push(el("div", { class: "note" }, n));
  return out;
}

async function turns() {
  document.getElementById("f-since").value = state.get("since") || "";
  document.getElementById("f-until").value = state.get("until") || "";
  const page = Number(state.get("page") || 1);
  try {
    const p = await api("/api/turns", { ...filters(), page });
    options("f-host", p.hosts, state.get("host"));
    options("f-mode", p.modes, state.get("mode"));
    options("f-surface", p.surfaces, state.get("surface"));
    if (p.all === 0) {
      fill("turns-summary", el("span", { class: "empty", id: "turns-empty" },
        `No turns logged yet in ${p.log}. They appear here once a host runs skillsearch (hook, mcp or serve).`));
    } else if (p.total === 0) {
      fill("turns-summary", el("span", { class: "empty", id: "turns-empty" }, `None of the ${fmt(p.all)} turns match these filters.`));
    } else {
      fill("turns-summary", `${fmt(p.total)} turns`, p.total !== p.all ? ` of ${fmt(p.all)}` : "",
        el("span", { class: "muted" }, ` (${p.log}; answered in ${fmt(p.elapsed_ms, 1)} ms)`));
    }
    fill("turns-body", p.turns.map((t) => el("tr", { class: "turn" + (t.error ? " failed" : "") },
      el("td", { class: "num" }, t.n),
      el("td", {}, t.ts.replace("T", " ").replace("Z", "")),
      el("td", {}, t.host || "—"),
      el("td", {}, t.surface),
      el("td", {}, t.mode),
      el("td", { class: "prompt" }, t.query),
      el("td", {}, found(t)),
      el("td", { class: "num" }, t.injected_tokens ? fmt(t.injected_tokens) : "0"),
      el("td", { class: "num" }, t.elapsed_ms && t.elapsed_ms.total !== undefined ? fmt(t.elapsed_ms.total, 1) : ""),
      el("td", {}, failures(t)))));
    fill("page-label", `page ${fmt(p.page)} of ${fmt(p.pages)}`);
    document.getElementById("newer").disabled = p.page <= 1;
    document.getElementById("older").disabled = p.page >= p.pages;
  } catch (e) {
    failed("turns-summary", e);
    fill("turns-body");
    fill("page-label");
  }
}

function go(page) {
  state.set("page", page);
  keep();
  turns();
}

// ---------------------------------------------------------------- plots

// A line plot on a log scale: series of {label, color, values, dash}, x labels at both ends.
function logPlot(series, { width = 900, height = 280, xFrom = "", xTo = "", unit = "tokens" }) {
  const pad = { l: 70, r: 20, t: 28, b: 34 };
  const all = series.flatMap((s) => s.values).filter((v) => v > 0);
  if (!all.length) return el("p", { class: "empty" }, "Nothing to plot yet.");
  const lo = Math.floor(Math.log10(Math.min(...all)));
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...all))));
  const n = Math.max(...series.map((s) => s.values.length));
  const x = (i) => pad.l + (n <= 1 ? 0.5 : i / (n - 1)) * (width - pad.l - pad.r);
  const y = (v) => pad.t + (1 - (Math.log10(Math.max(v, Math.pow(10, lo))) - lo) / (hi - lo)) * (height - pad.t - pad.b);
  const parts = [];
  for (let e = lo; e <= hi; e++) {
    parts.push(svg("line", { x1: pad.l, x2: width - pad.r, y1: y(10 ** e), y2: y(10 ** e), stroke: "#e4e7ec" }));
    parts.push(svg("text", { x: pad.l - 6, y: y(10 ** e) + 4, "text-anchor": "end", "font-size": 11, fill: "#667085" }, fmt(10 ** e)));
  }
  parts.push(svg("text", { x: 4, y: 12, "font-size": 11, fill: "#667085" }, unit));
  parts.push(svg("text", { x: pad.l, y: height - 8, "font-size": 11, fill: "#667085" }, xFrom));
  parts.push(svg("text", { x: width - pad.r, y: height - 8, "text-anchor": "end", "font-size": 11, fill: "#667085" }, xTo));
  for (const s of series) {
    const pts = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    parts.push(svg("polyline", { points: pts, fill: "none", stroke: s.color, "stroke-width": 2, "stroke-dasharray": s.dash || "none" },
      svg("title", {}, s.label)));
    if (s.values.length === 1) parts.push(svg("circle", { cx: x(0), cy: y(s.values[0]), r: 3, fill: s.color }));
  }
  return [
    svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": series.map((s) => s.label).join(" vs ") }, parts),
    el("div", { class: "legend" }, series.map((s) => el("span", {}, swatch(s.color), s.label))),
  ];
}

// Stacked bars: shown and hidden per point.
function stackPlot(points, { width = 900, height = 200 }) {
  const pad = { l: 70, r: 20, t: 12, b: 34 };
  const max = Math.max(1, ...points.map((p) => p.shown_mean + p.hidden_mean));
  const w = (width - pad.l - pad.r) / points.length;
  const h = (v) => (v / max) * (height - pad.t - pad.b);
  const base = height - pad.b;
  const parts = [
    svg("text", { x: pad.l - 6, y: pad.t + 4, "text-anchor": "end", "font-size": 11, fill: "#667085" }, fmt(max)),
    svg("text", { x: pad.l - 6, y: base, "text-anchor": "end", "font-size": 11, fill: "#667085" }, "0"),
    svg("text", { x: pad.l, y: height - 8, "font-size": 11, fill: "#667085" }, points[0].from.slice(0, 19).replace("T", " ")),
    svg("text", { x: width - pad.r, y: height - 8, "text-anchor": "end", "font-size": 11, fill: "#667085" }, points[points.length - 1].to.slice(0, 19).replace("T", " ")),
  ];
  points.forEach((p, i) => {
    const x0 = pad.l + i * w + w * 0.1;
    parts.push(svg("rect", { x: x0, y: base - h(p.shown_mean), width: w * 0.8, height: h(p.shown_mean), fill: "#2e5aac" },
      svg("title", {}, `${fmt(p.shown_mean)} schema tokens shown (mean of ${p.turns} turns)`)));
    parts.push(svg("rect", { x: x0, y: base - h(p.shown_mean) - h(p.hidden_mean), width: w * 0.8, height: h(p.hidden_mean), fill: "#d0d5dd" },
      svg("title", {}, `${fmt(p.hidden_mean)} schema tokens hidden`)));
  });
  return [
    svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": "tool-schema tokens shown vs hidden" }, parts),
    el("div", { class: "legend" },
      el("span", {}, swatch("#2e5aac"), "tool-schema tokens shown"),
      el("span", {}, swatch("#d0d5dd"), "hidden")),
  ];
}

// ---------------------------------------------------------------- funnel

async function funnel() {
  try {
    const f = await api("/api/funnel", filters());
    const c = f.catalogue;
    if (!f.turns) {
      fill("funnel-summary", el("span", { class: "empty", id: "funnel-empty" },
        `No turns to plot yet. Listing all ${fmt(c.skills)} eligible skills (OpenClaw's catalogue) costs ${fmt(c.tokens)} tokens every turn.`));
      fill("funnel-plot");
    } else {
      fill("funnel-summary", el("span", { id: "funnel-text" },
        `Over ${fmt(f.turns)} turns skillsearch injected or returned ${fmt(f.tokens)} tokens (${fmt(f.tokens / f.turns)} a turn); ` +
        `OpenClaw's catalogue of the same ${fmt(c.skills)} skills costs ${fmt(c.tokens)} tokens every turn (${fmt(f.catalogue_tokens)} in all): ` +
        `${fmt(100 * f.saved_share, 1)}% fewer tokens.`),
        f.failed ? el("span", { class: "error" }, ` ${fmt(f.failed)} turns failed.`) : null);
      const pts = f.points;
      fill("funnel-plot", logPlot([
        { label: `catalogue (${fmt(c.skills)} skills, every turn)`, color: "#b42318", dash: "6 4", values: pts.map(() => c.tokens) },
        { label: "skillsearch, most in a point", color: "#9db4e0", values: pts.map((p) => p.max) },
        { label: "skillsearch, mean per turn", color: "#2e5aac", values: pts.map((p) => p.mean) },
      ], { xFrom: pts[0].from.slice(0, 19).replace("T", " "), xTo: pts[pts.length - 1].to.slice(0, 19).replace("T", " "), unit: "tokens per turn" }));
    }
    if (f.tool_turns) {
      fill("tools-summary", el("span", { id: "tools-text" },
        `${fmt(f.tool_turns)} turns planned tool visibility: ${fmt(f.tools_shown / f.tool_turns)} schema tokens shown and ${fmt(f.tools_hidden / f.tool_turns)} hidden a turn ` +
        `(${fmt(100 * f.tools_hidden / Math.max(1, f.tools_shown + f.tools_hidden), 1)}% hidden).`));
      fill("tools-plot", stackPlot(f.tool_points, {}));
    } else {
      fill("tools-summary", el("span", { class: "muted" }, "No turn in the log planned tool visibility (serve's /v1/plan, the OpenClaw plugin)."));
      fill("tools-plot");
    }
  } catch (e) { failed("funnel-summary", e); }
}

// ---------------------------------------------------------------- library

function table(id, head, rows) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c))))));
}

async function library() {
  try {
    const l = await api("/api/library");
    const parts = [
      el("p", { id: "library-summary" },
        `${fmt(l.skills)} skills in ${fmt(l.files)} files under ${l.roots.length} root${l.roots.length === 1 ? "" : "s"}; ` +
        `${fmt(l.eligible)} offered on this machine; ${fmt(l.held_back.length)} held back; ` +
        `${fmt(l.shadowed.reduce((n, c) => n + c.shadowed.length, 0))} shadowed copies; ${fmt(l.diagnostics.length)} diagnostics. ` +
        `Listing them all costs ${fmt(l.catalogue.tokens)} tokens a turn.`),
      l.problem ? el("p", { class: "error" }, l.problem) : null,
      table("library-roots", ["root", "skills", "shadowed"], l.roots.map((r) => [r.path + (r.exists ? "" : " (missing)"), fmt(r.skills), fmt(r.shadowed)])),
    ];
    if (l.never_found) {
      const n = l.never_found;
      parts.push(el("h3", {}, "Never found"),
        el("p", { id: "never-found" }, `${fmt(n.count)} of ${fmt(l.eligible)} offered skills were not found by any of the last ${fmt(n.recent_turns)} turns.`),
        n.skills.length ? el("details", {}, el("summary", {}, `show ${n.skills.length < n.count ? "the first " + fmt(n.skills.length) : "them"}`),
          el("p", {}, n.skills.map((s) => el("span", { class: "tag" }, s)))) : null);
    }
    const held = l.held_back.length
      ? table("library-held", ["skill", "root", "why"], l.held_back.map((h) => [h.id, h.root, `${h.code}: ${h.reason}`]))
      : el("p", { class: "empty" }, "Every skill can run on this machine.");
    parts.push(el("h3", {}, `Held back (${fmt(l.held_back.length)})`),
      l.held_back.length > 20 ? el("details", {}, el("summary", {}, "show them, with the reason each cannot run here"), held) : held);
    parts.push(el("h3", {}, "Shadowed copies"),
      l.shadowed.length
        ? table("library-shadowed", ["name", "used", "shadowed"], l.shadowed.map((c) => [c.name, c.winner, c.shadowed.join("\n")]))
        : el("p", { class: "empty" }, "No skill name is used by more than one root."));
    const shown = l.diagnostics.slice(0, 300);
    parts.push(el("h3", {}, "Diagnostics"),
      shown.length
        ? [table("library-diagnostics", ["severity", "code", "file", "message"], shown.map((d) => [d.severity, d.code, d.path, d.message])),
          l.diagnostics.length > shown.length ? el("p", { class: "muted" }, `${fmt(l.diagnostics.length - shown.length)} more: skillsearch index --json lists them all.`) : null]
        : el("p", { class: "empty" }, "No diagnostics."));
    fill("library-out", parts);
  } catch (e) { failed("library-out", e); }
}

// ---------------------------------------------------------------- evals

async function evals() {
  try {
    const a = await api("/api/evals");
    if (!a.sets.length) {
      fill("evals-out", el("p", { class: "empty", id: "evals-empty" },
        `No stored runs in ${a.path}. skillsearch eval --skills DIR --queries FILE.jsonl --save stores one.`));
      return;
    }
    fill("evals-out", a.sets.map((s) => el("div", { class: "eval-set" },
      el("h3", {}, `${s.set} (${s.runs.length} run${s.runs.length === 1 ? "" : "s"})`),
      s.runs.length > 1 ? linePlot(s.runs) : null,
      table(null, ["time (UTC)", "retriever", "queries", "skills", "hit@1", "recall@10", "nDCG@10", "MRR@10", "p50 ms"],
        s.runs.map((r) => [r.ts.replace("T", " ").slice(0, 19), r.metrics.retriever, fmt(r.metrics.queries), fmt(r.metrics.skills),
          fmt(r.metrics["hit@1"], 3), fmt(r.metrics["recall@10"], 3), fmt(r.metrics["ndcg@10"], 3), fmt(r.metrics["mrr@10"], 3), fmt(r.metrics.p50_ms, 2)])))));
  } catch (e) { failed("evals-out", e); }
}

// hit@1 and nDCG@10 per run, on 0..1.
function linePlot(runs, width = 600, height = 160) {
  const pad = { l: 40, r: 12, t: 10, b: 26 };
  const x = (i) => pad.l + (i / (runs.length - 1)) * (width - pad.l - pad.r);
  const y = (v) => pad.t + (1 - v) * (height - pad.t - pad.b);
  const line = (key, color) => svg("polyline", {
    points: runs.map((r, i) => `${x(i).toFixed(1)},${y(r.metrics[key]).toFixed(1)}`).join(" "),
    fill: "none", stroke: color, "stroke-width": 2 }, svg("title", {}, key));
  return [
    svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": "hit@1 and nDCG@10 per run" },
      [0, 0.5, 1].map((v) => [svg("line", { x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), stroke: "#e4e7ec" }),
        svg("text", { x: pad.l - 4, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#667085" }, v)]),
      line("hit@1", "#2e5aac"), line("ndcg@10", "#067647")),
    el("div", { class: "legend" },
      el("span", {}, swatch("#2e5aac"), "hit@1"),
      el("span", {}, swatch("#067647"), "nDCG@10")),
  ];
}

// ---------------------------------------------------------------- start

async function status() {
  try {
    const s = await api("/api/status");
    fill("status", `${s.roots.length} root${s.roots.length === 1 ? "" : "s"} · mode ${s.mode} · retriever ${s.retriever} · v${s.version}`);
  } catch (e) { fill("status", el("span", { class: "error" }, e.message)); }
}

function everything() {
  document.getElementById("auth").hidden = true;
  return Promise.all([status(), search(), turns(), funnel(), library(), evals()]);
}

document.getElementById("search-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.set("q", document.getElementById("q").value);
  keep();
  search();
});
document.getElementById("turns-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  for (const [k, id] of FILTERS) {
    const v = document.getElementById(id).value;
    if (v) state.set(k, v); else state.delete(k);
  }
  state.delete("page");
  keep();
  turns();
  funnel();
});
document.getElementById("newer").addEventListener("click", () => go(Math.max(1, Number(state.get("page") || 1) - 1)));
document.getElementById("older").addEventListener("click", () => go(Number(state.get("page") || 1) + 1));
document.getElementById("auth-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("skillsearch-token", document.getElementById("auth-token").value);
  everything();
});

token();
everything().then(() => document.body.setAttribute("data-ready", "1"));
