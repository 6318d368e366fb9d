// The Mneme console (docs/console.md). No framework, no build step, no inline code.
// Rules: the API key lives in sessionStorage only and travels only in the Authorization header; every
// action is an ordinary API call (the server checks the role); stored text is always written with
// textContent (never innerHTML): memories, bodies and paths come from agents and may be hostile.
"use strict";

const KEY = "mneme.console.key";
const API = new URL("v1/", location.href); // /console → /v1/; behind a stage, /prod/console → /prod/v1/
const PAGES = ["scopes", "review", "drafts", "recall", "runs", "history"];
const ROLE_ORDER = ["reader", "writer", "approver", "admin"];
// The least role each page's routes need (the rest are a reader's): a key sees only the pages it can use
const PAGE_ROLE = { review: "writer", drafts: "approver", history: "approver" };
const state = { me: null, draft: null, bundleSeq: 0 };

// -- DOM helpers: text only --------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = String(value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const $ = (id) => document.getElementById(id);
function fill(target, ...children) {
  const node = typeof target === "string" ? $(target) : target;
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}
function say(message, isError) {
  const status = $("status");
  status.textContent = message || "";
  status.classList.toggle("error", Boolean(isError));
}
function age(seconds) {
  if (seconds < 90) return `${seconds} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} days`;
}
function show(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

// -- the API ------------------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(`${status} ${error.code || "error"}: ${error.message || "request failed"}`);
    this.status = status;
    this.code = error.code;
  }
}
async function api(method, path, body, accept) {
  const key = sessionStorage.getItem(KEY);
  const headers = { Authorization: `Bearer ${key}`, Accept: accept || "application/json" };
  const init = { method, headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(new URL(path, API), init);
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch (_) { parsed = text; }
  if (!response.ok) {
    if (response.status === 401) signOut("Your key was not accepted (401): sign in again.");
    throw new ApiError(response.status, parsed);
  }
  return parsed;
}
function can(role) {
  if (!state.me) return false;
  const wanted = ROLE_ORDER.indexOf(role);
  return state.me.roles.some((r) => ROLE_ORDER.indexOf(r) >= wanted);
}
// Tabs, forms and links marked data-role="<least role>" are shown only to keys that hold it
function fitToRoles() {
  for (const node of document.querySelectorAll("[data-role]")) node.hidden = !can(node.dataset.role);
}
const usable = (page) => can(PAGE_ROLE[page] || "reader");
async function run(action) {
  try {
    say("");
    await action();
  } catch (error) {
    say(error.message, true);
  }
}

// -- sign in / out and navigation --------------------------------------------------------------------
async function signIn(key) {
  sessionStorage.setItem(KEY, key);
  try {
    state.me = await api("GET", "me");
  } catch (error) {
    sessionStorage.removeItem(KEY);
    throw error;
  }
  $("who").textContent = `${state.me.principal} · ${state.me.roles.join(", ")} · tenant ${state.me.tenant}`;
  $("signin").hidden = true;
  for (const id of ["nav", "main", "sign-out"]) $(id).hidden = false;
  document.body.dataset.roles = state.me.roles.join(" ");
  fitToRoles();
  route();
}
function signOut(message, isError = true) {
  sessionStorage.removeItem(KEY);
  Object.assign(state, { me: null, draft: null, bundleSeq: 0 });
  for (const id of ["tree", "layers", "bundle", "bundle-markdown", "bundle-canonical", "queue", "mine", "draft", "recall-out", "runs", "history"]) fill(id);
  $("who").textContent = "";
  $("signin").hidden = false;
  for (const id of ["nav", "main", "sign-out"]) $(id).hidden = true;
  $("signin-error").textContent = message || "";
  $("signin-error").classList.toggle("error", isError);
  $("api-key").value = "";
}
function route() {
  if (!state.me) return;
  const wanted = location.hash.slice(1);
  const page = PAGES.includes(wanted) && usable(wanted) ? wanted : "scopes";
  for (const name of PAGES) {
    $(`page-${name}`).hidden = name !== page;
    const link = document.querySelector(`[data-nav="${name}"]`);
    if (name === page) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  say("");
  run(LOADERS[page]);
}

// -- scopes and bundles ------------------------------------------------------------------------------
async function loadScopes() {
  const [tree, layers] = await Promise.all([api("GET", "scopes?aliases=true"), api("GET", "layers")]);
  const byParent = new Map();
  for (const scope of tree.scopes) {
    const parent = scope.path.includes(".") ? scope.path.slice(0, scope.path.lastIndexOf(".")) : "";
    if (!byParent.has(parent)) byParent.set(parent, []);
    byParent.get(parent).push(scope);
  }
  const branch = (parent) => {
    const children = byParent.get(parent) || [];
    if (!children.length) return null;
    return el("ul", {}, children.map((scope) => el("li", {},
      el("button", { type: "button", class: "link", "data-path": scope.path, onclick: () => openBundle(scope.path) },
        scope.path.slice(scope.path.lastIndexOf(".") + 1)),
      (scope.aliases || []).length
        ? el("span", { class: "aliases" }, " also ", scope.aliases.map((a) => el("code", { class: "alias", text: a })))
        : null,
      branch(scope.path))));
  };
  fill("tree", branch("") || el("p", { text: "No scopes." }));
  fill("layers", Object.entries(layers.layers).flatMap(([depth, name]) => [el("dt", { text: `depth ${depth}` }), el("dd", { text: name })]));
  if (!state.bundleSeq) await openBundle($("bundle-path").value || "root"); // nothing asked for yet
}
async function openBundle(path) {
  const seq = ++state.bundleSeq; // the latest request wins: an earlier answer arriving late is dropped
  $("bundle-path").value = path;
  const bundle = await api("POST", "retrieve", { path });
  if (seq !== state.bundleSeq) return;
  $("bundle-canonical").textContent = bundle.canonical_path === bundle.path
    ? `Bundle for ${bundle.canonical_path}`
    : `${bundle.path} is an alias: it resolves to ${bundle.canonical_path}`;
  $("bundle-canonical").dataset.canonical = bundle.canonical_path;
  $("memory-scope").value = bundle.canonical_path; // propose where you are looking
  fill("bundle", bundle.blocks.length ? bundle.blocks.map(renderBlock) : el("p", { class: "hint", text: "No memories apply here." }));
  $("bundle-markdown").textContent = bundle.markdown;
}
function renderBlock(block) {
  const article = el("article", { class: block.pending ? "block pending" : "block", "data-key": block.key, "data-memory-id": block.memory_id });
  article.append(
    el("header", {},
      el("span", { class: "badge priority", title: "priority" }, `priority ${block.priority}`),
      el("span", { class: "badge", title: "kind" }, block.kind),
      el("code", { class: "target", text: block.target }),
      el("strong", { class: "key", text: block.key }),
      block.pending ? el("span", { class: "badge warn", text: "pending" }) : null,
      el("span", { class: "hint" }, ` v${block.version}`),
      can("approver") ? el("a", { href: "#history", class: "hint", onclick: () => { $("history-id").value = block.memory_id; } }, "history") : null,
      can("writer") ? el("button", { type: "button", class: "link edit", onclick: () => editBlock(block, article) }, "edit") : null),
    el("pre", { class: "body", text: block.body }));
  return article;
}
function editBlock(block, article) {
  if (article.querySelector("form")) return;
  const id = `edit-${block.memory_id}`;
  const form = el("form", { class: "edit-form" },
    el("label", { for: id }, `New body for ${block.key}`),
    el("textarea", { id, rows: 4 }),
    el("div", { class: "actions" },
      el("button", { type: "submit" }, "Save edit"),
      el("button", { type: "button", class: "reject", onclick: () => form.remove() }, "Cancel")));
  form.querySelector("textarea").value = block.body;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run(async () => {
      const answer = await api("PATCH", `memories/${encodeURIComponent(block.memory_id)}`, { body: $(id).value, version: block.version });
      say(answer.pending_revision ? `Your edit of ${block.key} is pending review.` : `${block.key} is now version ${answer.version}.`);
      await openBundle($("bundle-canonical").dataset.canonical || $("bundle-path").value);
    });
  });
  article.append(form);
  form.querySelector("textarea").focus();
}
async function proposeMemory(form) {
  const data = Object.fromEntries(new FormData(form));
  const body = { key: data.key, body: data.body };
  if (data.tag) body.tag = data.tag; else body.scope = data.scope || $("bundle-path").value;
  const memory = await api("POST", "memories", body);
  say(`Memory ${memory.key} is ${memory.status} (id ${memory.memory_id}).`);
  form.reset();
  await openBundle($("bundle-canonical").dataset.canonical || $("bundle-path").value);
}

// -- review -------------------------------------------------------------------------------------------
async function loadReview() {
  const path = $("review-path").value.trim();
  const approver = can("approver");
  $("queue-title").hidden = !approver;
  fill("queue");
  if (approver) {
    const queue = await api("GET", path ? `reviews?path=${encodeURIComponent(path)}` : "reviews");
    fill("queue", queue.queue.length ? queue.queue.map(renderQueueItem) : el("p", { class: "hint", text: "Nothing waits for review." }));
  }
  const mine = await api("GET", "reviews?mine=true");
  fill("mine", mine.mine.length ? el("table", {},
    el("thead", {}, el("tr", {}, ["kind", "key or memory", "target / change", "status", "decided by", "reason"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, mine.mine.map((item) => el("tr", { "data-memory-id": item.memory_id },
      el("td", { text: item.kind }), el("td", { text: item.key || item.memory_id }),
      el("td", { text: item.target || (item.changes ? Object.keys(item.changes).join(", ") + ` (on version ${item.base_version})` : "") }),
      el("td", { text: item.status }), el("td", { text: item.decided_by || "" }), el("td", { text: item.reason || "" })))))
    : el("p", { class: "hint", text: "You have proposed nothing yet." }));
}
function renderQueueItem(item) {
  const reasonId = `reason-${item.memory_id}-${item.author}`;
  const decide = (action) => run(async () => {
    const reason = $(reasonId).value.trim();
    const body = { author: item.author };
    if (reason) body.reason = reason;
    await api("POST", `memories/${encodeURIComponent(item.memory_id)}/${action}`, body);
    say(`${action === "approve" ? "Approved" : "Rejected"} ${item.key}.`);
    await loadReview();
  });
  return el("article", { class: "card review", "data-memory-id": item.memory_id, "data-key": item.key },
    el("header", {},
      el("strong", { class: "key", text: item.key }), " ",
      el("span", { class: "badge", text: item.kind }), " ",
      el("code", { text: item.target }), " ",
      item.stale ? el("span", { class: "badge warn", text: "stale: made on an older version" }) : null),
    el("p", { class: "hint" }, `by ${item.author} · ${age(item.age_seconds)} ago`,
      item.published_version ? ` · published version ${item.published_version}` : " · not yet published"),
    el("table", { class: "diff" },
      el("thead", {}, el("tr", {}, ["field", "published", "proposed"].map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, Object.entries(item.diff).map(([field, [before, after]]) => el("tr", {},
        el("th", { scope: "row", text: field }),
        el("td", { class: "before" }, el("pre", { text: show(before) })),
        el("td", { class: "after" }, el("pre", { text: show(after) })))))),
    el("label", { for: reasonId }, "Reason (needed to reject)"),
    el("textarea", { id: reasonId, rows: 2 }),
    el("div", { class: "actions" },
      el("button", { type: "button", class: "approve", onclick: () => decide("approve") }, "Approve"),
      el("button", { type: "button", class: "reject", onclick: () => decide("reject") }, "Reject"),
      el("a", { href: "#history", onclick: () => { $("history-id").value = item.memory_id; } }, "history")));
}

// -- structure drafts ---------------------------------------------------------------------------------
function operationFrom(data) {
  if (data.op === "move") return { op: "move", path: data.path, new_parent: data.target };
  if (data.op === "merge") return { op: "merge", path: data.path, into: data.target };
  if (data.op === "delete") {
    const op = { op: "delete", path: data.path, records: data.records };
    if (data.records === "move") op.into = data.target;
    return op;
  }
  const layers = {};
  for (const part of data.layers.split(",")) {
    const [depth, name] = part.split("=").map((s) => s.trim());
    if (depth && name) layers[depth] = name;
  }
  return { op: "layers", layers };
}
function showDraftFields() {
  const op = $("draft-op").value;
  for (const field of document.querySelectorAll("#draft-form [data-ops]")) field.hidden = !field.dataset.ops.split(" ").includes(op);
}
async function createDraft(form) {
  const draft = await api("POST", "structure/drafts", { operations: [operationFrom(Object.fromEntries(new FormData(form)))] });
  renderDraft(draft);
}
async function openDraft(id) {
  renderDraft(await api("GET", `structure/drafts/${encodeURIComponent(id)}`));
}
function list(title, items, render) {
  return el("section", { class: "preview-part" }, el("h4", { text: `${title} (${items.length})` }),
    items.length ? el("ul", {}, items.map((item) => el("li", {}, render(item)))) : el("p", { class: "hint", text: "none" }));
}
function renderDraft(draft) {
  state.draft = draft;
  $("draft-id").value = draft.draft_id;
  const p = draft.preview;
  const open = draft.status === "open";
  fill("draft", el("article", { class: "card", "data-draft-id": draft.draft_id },
    el("h3", {}, "Draft ", el("code", { text: draft.draft_id }), " ", el("span", { class: "badge", id: "draft-status", text: draft.status })),
    el("p", { class: "hint" }, `by ${draft.author} · ${draft.operations.map((o) => o.op).join(", ")}`),
    list("Conflicts", p.conflicts, (c) => el("span", { class: "error", text: c })),
    list("Paths that change", p.path_changes, ([from, to]) => [el("code", { text: from }), " → ", to ? el("code", { text: to }) : el("em", { text: "removed" })]),
    list("Aliases (old paths that keep resolving)", p.aliases, ([from, to]) => [el("code", { text: from }), " → ", el("code", { text: to })]),
    list("Memories", p.memories, (m) => [el("strong", { text: m.key }), " ", el("code", { text: m.from }), " → ", el("code", { text: m.to })]),
    list("Tagged memories that start or stop applying", p.tagged || [], (t) => [el("strong", { text: t.key }), ` (${t.tag}) ${t.applies} applying at `, el("code", { text: t.scope })]),
    list("Episodes and facts", p.records, (r) => el("code", { text: JSON.stringify(r) })),
    el("p", { class: "hint" }, "fingerprint ", el("code", { text: p.fingerprint })),
    open ? el("div", { class: "actions" },
      el("button", { type: "button", id: "draft-publish", onclick: () => run(publishDraft) }, "Publish"),
      el("button", { type: "button", id: "draft-discard", class: "reject", onclick: () => run(discardDraft) }, "Discard")) : null));
}
async function publishDraft() {
  const draft = await api("POST", `structure/drafts/${encodeURIComponent(state.draft.draft_id)}/publish`, { fingerprint: state.draft.preview.fingerprint });
  renderDraft(draft);
  say(`Draft ${draft.draft_id} published.`);
}
async function discardDraft() {
  const draft = await api("POST", `structure/drafts/${encodeURIComponent(state.draft.draft_id)}/discard`, {});
  renderDraft(draft);
  say(`Draft ${draft.draft_id} discarded.`);
}
async function loadDrafts() {}  // drafts are opened by id or made by the form

// -- recall -------------------------------------------------------------------------------------------
async function recall(form) {
  const d = Object.fromEntries(new FormData(form));
  // The form's fields carry the request model's defaults and bounds (tests/unit/test_console_forms.py); a field
  // left empty is left out (undefined is not sent), so the API's default applies.
  const number = (name) => (d[name] ? Number(d[name]) : undefined);
  const request = {
    query: d.query, scope: d.scope || undefined, limit: number("limit"), explain: true,
    scoring: { alpha: number("alpha"), beta: number("beta"), strictness: d.strictness, fallback: d.fallback },
    disclosure: { expand_top: number("expand_top"), budget_tokens: number("budget_tokens") },
  };
  renderRecall(await api("POST", "recall", request));
}
function bars(scores, top) {
  // Each channel's bar is scaled to its largest value in this answer (raw BM25 is not in 0..1).
  return el("div", { class: "bars" }, Object.entries(scores).map(([channel, value]) => el("div", { class: "bar-row" },
    el("span", { class: "bar-label", text: channel }),
    el("meter", { min: 0, max: top[channel], value: Math.max(0, value), title: `${channel} ${value.toFixed(3)}`, "aria-label": `${channel} score` }),
    el("span", { class: "bar-value", text: value.toFixed(3) }))));
}
function renderRecall(response) {
  const trace = response.explain || { stages: [], omitted: [] };
  const maxIn = Math.max(1, ...trace.stages.map((s) => s.in || 0));
  const top = {};
  for (const r of response.results) for (const [channel, value] of Object.entries(r.scores)) top[channel] = Math.max(top[channel] || 1, value);
  fill("recall-out",
    el("p", {}, "retrieval path ", el("strong", { id: "retrieval-path", text: response.retrieval_path }), ` · ${response.results.length} results`),
    el("h3", { text: "Results" }),
    response.results.length ? el("ol", { class: "results" }, response.results.map((r) => el("li", { "data-id": r.id },
      el("header", {}, el("span", { class: "badge", text: r.kind }), " ", el("code", { text: r.scope }), " ",
        r.key ? el("strong", { text: r.key }) : null, " ", el("span", { class: "hint", text: `score ${r.score.toFixed(3)}` })),
      el("pre", { class: "body", text: r.content }),
      bars(r.scores, top)))) : el("p", { class: "hint", text: "Nothing was admitted." }),
    el("h3", { text: "Explain: the stages" }),
    el("table", { class: "stages", id: "stages" },
      el("thead", {}, el("tr", {}, ["stage", "in", "out", "dropped", ""].map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, trace.stages.map((s) => el("tr", { "data-stage": s.stage },
        el("th", { scope: "row", text: s.stage }), el("td", { text: s.in }), el("td", { text: s.out }),
        el("td", { text: (s.dropped || []).length }),
        el("td", {}, el("meter", { min: 0, max: maxIn, value: s.out || 0, title: `${s.out} of ${s.in}`, "aria-label": `${s.stage}: ${s.out} passed on` })))))),
    el("h3", { text: `Omissions (${(trace.omitted || []).length})` }),
    (trace.omitted || []).length ? el("ul", { id: "omitted" }, trace.omitted.map((o) => el("li", {}, el("code", { text: o.id }), " — ", el("span", { text: o.reason }))))
      : el("p", { class: "hint", text: "Nothing was omitted." }),
    el("details", {}, el("summary", { text: "Filters, anchors and fallback" }),
      el("pre", { class: "source", text: JSON.stringify({ filters: trace.filters, anchors: trace.anchors, fallback: trace.fallback }, null, 2) })),
    el("h3", { text: "The context pack, as the agent sees it" }),
    el("pre", { class: "source", id: "context-pack", text: response.context }));
}

// -- consolidation runs -------------------------------------------------------------------------------
async function loadRuns() {
  const page = await api("GET", "consolidations");
  fill("runs", page.runs.length ? page.runs.map(renderRun) : el("p", { class: "hint", text: "No runs yet." }));
}
function renderRun(r) {
  const stages = Object.entries(r.stages || {});
  return el("article", { class: "card run", "data-run-id": r.run_id },
    el("header", {}, el("code", { text: r.run_id }), " ", el("span", { class: `badge status-${r.status}`, text: r.status }),
      el("span", { class: "hint" }, ` started ${r.started_at} by ${r.requested_by}`, r.finished_at ? ` · finished ${r.finished_at}` : "")),
    el("p", { class: "hint" }, `${(r.scopes || []).length} scopes`),
    stages.length ? el("table", {},
      el("thead", {}, el("tr", {}, ["stage", "counters", "errors"].map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, stages.map(([name, report]) => el("tr", {},
        el("th", { scope: "row", text: name }),
        el("td", { text: Object.entries(report.counters || {}).map(([k, v]) => `${k} ${v}`).join(" · ") }),
        el("td", { text: (report.errors || []).map((e) => e.message || JSON.stringify(e)).join("; ") })))))
      : null,
    runList("Facts written", "run-facts", r.facts, (f) => [el("code", { text: f.fact_id }), ` ${f.summary}`,
      f.status !== "active" ? ` (${f.status})` : ""]),
    runList("Windows set aside (offered again after a backoff)", "run-set-aside", r.set_aside, (c) => [
      `${c.reason} — ${c.episodes} episodes: `, el("code", { text: (c.episode_ids || []).join(", ") }),
      c.episodes > (c.episode_ids || []).length ? " …" : ""]),
    runList("Windows offered again", "run-returned", r.returned, (c) => [
      `${c.outcome} (attempt ${c.attempts}) — ${c.episodes} episodes: `, el("code", { text: (c.episode_ids || []).join(", ") }),
      c.episodes > (c.episode_ids || []).length ? " …" : ""]));
}
// A run's facts or set-aside clusters: a titled list (items written as text only), or nothing when empty.
function runList(title, cls, items, item) {
  if (!items || !items.length) return null;
  return el("section", { class: cls }, el("h4", { text: `${title} (${items.length})` }),
    el("ul", {}, items.map((x) => el("li", {}, ...item(x)))));
}
async function startRun(form) {
  const scopes = new FormData(form).get("scopes").split(",").map((s) => s.trim()).filter(Boolean);
  const started = await api("POST", "consolidate", scopes.length ? { scopes } : {});
  say(`Run ${started.run_id} started (${started.status}).`);
  await loadRuns();
}

// -- history ------------------------------------------------------------------------------------------
async function loadHistory() {
  const id = $("history-id").value.trim();
  if (id) await showHistory(id);
}
async function showHistory(id) {
  const history = await api("GET", `memories/${encodeURIComponent(id)}/history`);
  fill("history", el("table", {},
    el("thead", {}, el("tr", {}, ["version", "when", "action", "by", "approved by", "status", "changes", "reason"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, history.history.map((h) => el("tr", {},
      el("td", { text: h.version }), el("td", { text: h.at }), el("td", { text: h.action }), el("td", { text: h.actor }),
      el("td", { text: h.approved_by || "" }), el("td", { text: h.status }),
      el("td", {}, Object.entries(h.changes || {}).map(([field, [before, after]]) => el("div", {},
        el("strong", { text: `${field}: ` }), el("del", { text: show(before) }), " → ", el("ins", { text: show(after) })))),
      el("td", { text: h.reason || "" }))))));
}

const LOADERS = { scopes: loadScopes, review: loadReview, drafts: loadDrafts, recall: async () => {}, runs: loadRuns, history: loadHistory };

// -- wiring -------------------------------------------------------------------------------------------
function onSubmit(id, action) {
  $(id).addEventListener("submit", (event) => {
    event.preventDefault();
    run(() => action(event.target));
  });
}
document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("signin-error").textContent = "";
    try {
      await signIn($("api-key").value.trim());
      $("api-key").value = "";
    } catch (error) {
      $("signin-error").textContent = error.message;
      $("signin-error").classList.add("error");
    }
  });
  $("sign-out").addEventListener("click", () => signOut("Signed out: the key is forgotten.", false));
  onSubmit("bundle-form", (form) => openBundle(new FormData(form).get("path").trim()));
  onSubmit("memory-form", proposeMemory);
  onSubmit("review-filter", loadReview);
  onSubmit("draft-form", createDraft);
  $("draft-op").addEventListener("change", showDraftFields);
  showDraftFields();
  onSubmit("draft-open", (form) => openDraft(new FormData(form).get("draft_id").trim()));
  onSubmit("recall-form", recall);
  onSubmit("run-form", startRun);
  $("runs-refresh").addEventListener("click", () => run(loadRuns));
  onSubmit("history-form", (form) => showHistory(new FormData(form).get("memory_id").trim()));
  window.addEventListener("hashchange", route);
  const saved = sessionStorage.getItem(KEY);
  if (saved) signIn(saved).catch((error) => signOut(error.message));
});
