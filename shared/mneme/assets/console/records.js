// The console's Episodes and Facts pages (docs/console.md): browse what agents wrote by scope, session, time and
// metadata, search it, open one with its sources or the facts drawn from it, forget it (after a confirmation),
// correct a fact. Loaded after console.js, whose helpers it uses (el, $, fill, api, run, can, say, show); it adds
// its pages to PAGES / LOADERS and clears its areas on sign-out. Stored text is written with textContent only.
"use strict";

const RECORD_AREAS = ["episodes", "episode", "facts", "fact"];
const records = { episodes: null, facts: null }; // the filters of the list shown, and its next cursor

PAGES.push("episodes", "facts");
LOADERS.episodes = () => listRecords("episodes");
LOADERS.facts = () => listRecords("facts");
const signOutFirst = signOut;
signOut = function (message, isError = true) { // eslint-disable-line no-global-assign
  for (const id of RECORD_AREAS) fill(id);
  signOutFirst(message, isError);
};

function metadataPairs(text) {
  // "user=alice, topic=diet" → [["user", "alice"], ["topic", "diet"]]; a key given twice accepts either value
  return (text || "").split(",").map((p) => p.trim()).filter(Boolean).map((pair) => {
    const at = pair.indexOf("=");
    if (at < 1) throw new Error(`metadata filter: write key=value, not "${pair}"`);
    return [pair.slice(0, at).trim(), pair.slice(at + 1).trim()];
  });
}
function filtersOf(kind) {
  const data = new FormData($(`${kind}-filter`));
  const value = (name) => (data.get(name) || "").trim();
  return { scope: value("scope") || "root", session_id: value("session_id"), since: value("since"),
           until: value("until"), metadata: metadataPairs(value("metadata")), query: value("query") };
}
function listQuery(filters, cursor) {
  const query = new URLSearchParams({ scope: filters.scope, limit: "25" });
  for (const name of ["session_id", "since", "until"]) if (filters[name]) query.set(name, filters[name]);
  for (const [key, value] of filters.metadata) query.append(`metadata.${key}`, value);
  if (cursor) query.set("cursor", cursor);
  return query;
}

async function listRecords(kind, more) {
  const filters = more ? records[kind].filters : filtersOf(kind);
  if (kind === "facts") filters.session_id = "";
  if (filters.query) return searchRecords(kind, filters);
  const page = await api("GET", `${kind}?${listQuery(filters, more ? records[kind].cursor : null)}`);
  records[kind] = { filters, cursor: page.next_cursor };
  const items = page[kind].map((record) => recordItem(record));
  const list = more ? $(`${kind}`).querySelector("ul") : null;
  if (list) list.append(...items);
  else fill(kind, items.length ? el("ul", { class: "records" }, items) : el("p", { class: "hint", text: `No ${kind} here.` }));
  $(`${kind}-more`).hidden = !page.has_more;
}
async function searchRecords(kind, filters) {
  const body = { query: filters.query, scope: filters.scope, kinds: [kind.slice(0, -1)], limit: 50 };
  for (const name of ["session_id", "since", "until"]) if (filters[name]) body[name] = filters[name];
  if (filters.metadata.length) {
    body.metadata = {};
    for (const [key, value] of filters.metadata) (body.metadata[key] = body.metadata[key] || []).push(value);
  }
  const found = await api("POST", "recall", body);
  $(`${kind}-more`).hidden = true;
  fill(kind, found.results.length
    ? el("ul", { class: "records" }, found.results.map((r) => recordItem({ ...r, summary: r.content, ...(r.fact || {}) })))
    : el("p", { class: "hint", text: `No ${kind} match "${filters.query}".` }));
}

function recordItem(r) {
  const episode = r.kind === "episode";
  const when = episode ? r.occurred_at : r.valid_from;
  const head = el("header", {},
    el("button", { type: "button", class: "link", text: r.id, "data-open": r.id,
                   onclick: () => run(() => (episode ? openEpisode(r.id) : openFact(r.id))) }),
    el("span", { class: "badge", text: r.scope }),
    el("span", { text: (when || "").replace("T", " ").slice(0, 16) }),
    r.session_id ? el("span", { class: "badge", text: `session ${r.session_id}` }) : null,
    !episode ? el("span", { class: r.stale ? "badge warn" : "badge", text: `${r.tier} · ${r.status}${r.stale ? " · stale" : ""}` }) : null);
  const meta = r.metadata && Object.keys(r.metadata).length ? el("p", { class: "hint", text: `metadata ${JSON.stringify(r.metadata)}` }) : null;
  return el("li", { "data-id": r.id }, head, el("pre", { class: "body", text: episode ? r.content : r.summary }), meta);
}

// -- one episode / one fact -----------------------------------------------------------------------------
async function openEpisode(id) {
  if (location.hash !== "#episodes") location.hash = "#episodes";
  const e = await api("GET", `episodes/${encodeURIComponent(id)}`);
  fill("episode", el("article", { class: "card", "aria-label": `episode ${e.id}` },
    el("h3", { text: `Episode ${e.id}` }),
    el("dl", { class: "layers" }, fields([["scope", e.scope], ["occurred", e.occurred_at], ["remembered", e.created_at],
      ["session", e.session_id], ["author", e.author], ["tier", e.tier], ["metadata", e.metadata]])),
    el("pre", { class: "source", text: e.content }),
    el("h4", { text: "Facts drawn from it" }),
    e.facts.length ? el("ul", {}, e.facts.map((f) => el("li", {}, el("button", { type: "button", class: "link",
      text: f.id, onclick: () => run(() => openFact(f.id)) }), ` ${f.summary}`))) : el("p", { class: "hint", text: "None." }),
    can("writer") ? forgetControl("episode", e.id, "Its facts are settled: retracted when it was their last source, "
      + "re-grounded on their other sources, marked stale, or rebuilt.") : null));
  $("episode").scrollIntoView();
}
async function openFact(id) {
  if (location.hash !== "#facts") location.hash = "#facts";
  const f = await api("GET", `facts/${encodeURIComponent(id)}`);
  fill("fact", el("article", { class: "card", "aria-label": `fact ${f.id}` },
    el("h3", { text: `Fact ${f.id}` }),
    el("dl", { class: "layers" }, fields([["scope", f.scope], ["entity", f.entity], ["property", f.property],
      ["value", f.value], ["tier", f.tier], ["status", f.status + (f.stale ? " (stale)" : "")], ["confidence", f.confidence],
      ["valid from", f.valid_from], ["valid until", f.valid_until], ["version", f.version]])),
    el("pre", { class: "source", text: f.summary }),
    el("h4", { text: "Sources" }),
    el("ul", {}, f.sources.map((e) => el("li", {}, el("button", { type: "button", class: "link", text: e.id,
      onclick: () => run(() => openEpisode(e.id)) }), ` ${e.content}`)),
      f.missing_sources.map((missing) => el("li", { class: "hint", text: `${missing} (forgotten or erased)` }))),
    f.history.length ? el("h4", { text: "Corrections" }) : null,
    f.history.length ? el("table", {}, el("tbody", {}, f.history.map((h) => el("tr", {}, el("td", { text: h.at }),
      el("td", { text: h.actor }), el("td", {}, Object.entries(h.changes || {}).map(([field, [before, after]]) => el("div", {},
        el("strong", { text: `${field}: ` }), el("del", { text: show(before) }), " → ", el("ins", { text: show(after) })))),
      el("td", { text: h.reason || "" }))))) : null,
    can("approver") ? correctForm(f) : null,
    can("approver") ? forgetControl("fact", f.id, "Its source episodes stay: forget them too if what they say must go.") : null));
  $("fact").scrollIntoView();
}
function fields(pairs) {
  return pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .flatMap(([name, value]) => [el("dt", { text: name }), el("dd", { text: show(value) })]);
}

function forgetControl(kind, id, consequence) {
  const confirmBox = el("form", { class: "edit-form", hidden: true, "aria-label": `Confirm forgetting ${id}` },
    el("p", { class: "error", text: `Forget ${kind} ${id} for good? It leaves search at once and cannot be restored. ${consequence}` }),
    el("label", { for: `forget-reason-${id}`, text: "Reason (kept with who forgot it and when)" }),
    el("input", { id: `forget-reason-${id}`, name: "reason" }),
    el("div", { class: "actions" },
      el("button", { type: "submit", class: "reject", text: "Forget for good" }),
      el("button", { type: "button", class: "link", text: "Cancel", onclick: () => { confirmBox.hidden = true; } })));
  confirmBox.addEventListener("submit", (event) => {
    event.preventDefault();
    run(async () => {
      const reason = new FormData(confirmBox).get("reason").trim();
      const query = reason ? `?${new URLSearchParams({ reason })}` : "";
      const done = await api("DELETE", `${kind}s/${encodeURIComponent(id)}${query}`);
      const settled = done.settled.map((s) => `${s.id} ${s.action}`).join(", ");
      fill(kind, el("p", { class: "status", role: "status", text: `Forgot ${kind} ${id}.${settled ? ` Facts: ${settled}.` : ""}` }));
      await listRecords(`${kind}s`);
    });
  });
  return el("div", {}, el("button", { type: "button", class: "reject", text: `Forget this ${kind}…`,
    onclick: () => { confirmBox.hidden = false; confirmBox.querySelector("input").focus(); } }), confirmBox);
}
function correctForm(f) {
  const form = el("form", { class: "edit-form", "aria-label": `Correct fact ${f.id}` }, el("h4", { text: "Correct this fact" }),
    ["value", "entity", "property", "summary"].flatMap((name) => [el("label", { for: `correct-${name}`, text: name }),
      el("input", { id: `correct-${name}`, name, value: f[name] || "" })]),
    el("label", { for: "correct-reason", text: "Reason (kept in the history)" }), el("input", { id: "correct-reason", name: "reason" }),
    el("button", { type: "submit", text: `Save as version ${f.version + 1}` }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run(async () => {
      const data = new FormData(form);
      const body = { version: f.version };
      for (const name of ["value", "entity", "property", "summary"]) {
        const value = data.get(name).trim();
        if (value && value !== (f[name] || "")) body[name] = value;
      }
      if (data.get("reason").trim()) body.reason = data.get("reason").trim();
      await api("PATCH", `facts/${encodeURIComponent(f.id)}`, body);
      say(`Fact ${f.id} corrected.`);
      await openFact(f.id);
    });
  });
  return form;
}

document.addEventListener("DOMContentLoaded", () => {
  for (const kind of ["episodes", "facts"]) {
    onSubmit(`${kind}-filter`, () => listRecords(kind));
    $(`${kind}-more`).addEventListener("click", () => run(() => listRecords(kind, true)));
  }
});
