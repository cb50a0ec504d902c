// The review page: plain DOM, no framework, no build step, nothing fetched from another origin.
// The owner key lives in sessionStorage and goes to this gateway's REST API as a header (see
// brain/gateway/review.py for why). Every value from the API is written with textContent, never
// as HTML, so a memory or a proposal cannot inject markup or script into the page.
"use strict";

const API = "/brain/v1";
const KEY = "brain-review-key";
const $ = (id) => document.getElementById(id);
const state = { proposal: null, namespaces: [], view: "proposals" };

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : d.toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

function score(x) {
  return typeof x === "number" ? x.toFixed(2) : String(x ?? "");
}

function age(iso) {
  const hours = (Date.now() - new Date(iso).getTime()) / 3.6e6;
  if (hours < 1) return "under an hour ago";
  if (hours < 48) return `${Math.floor(hours)} h ago`;
  return `${Math.floor(hours / 24)} days ago`;
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `the gateway answered ${status}`);
    this.status = status;
    this.code = body && body.code;
  }
}

async function api(method, path, body, key) {
  const headers = { authorization: `Bearer ${key || sessionStorage.getItem(KEY) || ""}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch(API + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  let data = null;
  try {
    data = await r.json();
  } catch (e) {
    data = null;
  }
  if (!r.ok) {
    if (r.status === 401 && !key) signOut("Your key was refused: " + ((data && data.message) || "unauthorized"));
    throw new ApiError(r.status, data);
  }
  return data;
}

// ------------------------------------------------------------------------------------ session

async function signIn(event) {
  event.preventDefault();
  const key = $("key").value.trim();
  $("login-error").textContent = "";
  if (!key) return;
  try {
    const who = await api("GET", "/review/session", undefined, key);
    sessionStorage.setItem(KEY, key);
    $("key").value = "";
    await enter(who);
  } catch (e) {
    $("login-error").textContent = e.message;
  }
}

function signOut(message) {
  sessionStorage.removeItem(KEY);
  $("nav").hidden = $("whoami").hidden = true;
  for (const v of document.querySelectorAll(".view")) v.hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = typeof message === "string" ? message : "";
}

async function enter(who) {
  $("login").hidden = true;
  $("nav").hidden = $("whoami").hidden = false;
  $("whoami-name").textContent = `signed in as ${who.name} (owner)`;
  await show(location.hash.slice(1) || "proposals");
}

async function show(view) {
  if (!["proposals", "memories", "digest"].includes(view)) view = "proposals";
  state.view = view;
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== view;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === view);
  if (view === "proposals") await loadProposals();
  if (view === "memories") await loadMemories();
  if (view === "digest") await loadDigest();
}

// ---------------------------------------------------------------------------------- proposals

async function loadProposals() {
  const status = $("proposal-status").value;
  const list = $("proposal-list");
  const data = await api("GET", `/proposals?status=${encodeURIComponent(status)}&limit=200`);
  clear(list);
  $("proposal-empty").hidden = data.proposals.length > 0;
  for (const p of data.proposals) {
    const li = el(
      "li",
      { dataset: { id: p.id }, class: "proposal-item" },
      el("span", { class: "title" }, p.title),
      el("span", { class: "meta" }, `${p.kind} · ${p.namespace} · score ${score(p.score)} · ${age(p.created_at)}`)
    );
    li.addEventListener("click", () => openProposal(p.id));
    list.append(li);
  }
  if (status === "pending") $("pending-count").textContent = data.proposals.length ? String(data.proposals.length) : "";
  $("proposal").hidden = true;
}

function evidenceItem(e, records) {
  if (e.type === "episode") {
    const r = records.get(e.memory_id);
    const head = `by ${(r && r.author) || e.author || "?"} · ${e.kind || (r && r.kind) || "entry"}` +
      (r && r.episode ? ` · episode ${r.episode}` : "") +
      (e.session ? ` · session record ${e.session}` : "") +
      (r ? ` · ${when(r.created_at)}` : "");
    const li = el("li", { class: "episode" }, el("strong", {}, (r && r.title) || e.title || "Session record"));
    if (e.cited) li.append(el("span", { class: "cited" }, "cited"));
    li.append(el("span", { class: "meta" }, ` ${head} · ${e.memory_id}`));
    li.append(el("span", { class: "excerpt" }, r ? r.body.slice(0, 600) : e.excerpt || "(record no longer readable)"));
    return li;
  }
  if (e.type === "query") {
    return el("li", { class: "query" }, el("strong", {}, "asked, found nothing: "), e.query || "",
      el("span", { class: "meta" }, e.key ? ` (key ${e.key})` : ""));
  }
  if (e.type === "supersedes") return null;
  return el("li", {}, JSON.stringify(e));
}

async function openProposal(id) {
  for (const li of document.querySelectorAll("#proposal-list li")) li.classList.toggle("selected", li.dataset.id === id);
  const p = await api("GET", `/review/proposals/${encodeURIComponent(id)}`);
  state.proposal = p;
  $("p-result").textContent = "";
  $("p-result").className = "result";
  $("proposal").hidden = false;
  $("p-title").textContent = p.title;
  $("p-meta").textContent =
    `${p.kind} · ${p.namespace}` +
    (p.target_namespace && p.target_namespace !== p.namespace ? ` (writes to ${p.target_namespace})` : "") +
    ` · score ${score(p.score)} · from ${p.authors.join(", ")} · drafted ${when(p.created_at)}`;
  $("p-body").textContent = p.body;
  const diff = $("p-diff");
  clear(diff);
  $("p-diff-box").hidden = !p.diff;
  if (p.diff) {
    $("p-current-meta").textContent = p.current
      ? `${p.current.title || "memory " + p.current.id} in ${p.current.namespace} by ${p.current.author} (${p.current.tier}, ${p.current.status})`
      : "";
    for (const run of p.diff) {
      const tag = run.op === "insert" ? "ins" : run.op === "delete" ? "del" : "span";
      diff.append(el(tag, {}, run.text));
    }
  }
  const ev = $("p-evidence");
  clear(ev);
  const records = new Map(p.records.map((r) => [r.id, r]));
  for (const e of p.evidence) {
    const item = evidenceItem(e, records);
    if (item) ev.append(item);
  }
  const pending = p.status === "pending";
  $("p-decide").hidden = !pending;
  $("p-reason").value = "";
  $("p-decision").textContent = pending
    ? ""
    : `${p.status} by ${p.decided_by} ${when(p.decided_at)}` + (p.reason ? `: ${p.reason}` : "") +
      (p.memory_id ? ` (memory ${p.memory_id})` : "");
}

async function decide(verb) {
  const p = state.proposal;
  const out = $("p-result");
  out.className = "result";
  out.textContent = "";
  const reason = $("p-reason").value.trim();
  for (const b of [$("p-approve"), $("p-reject")]) b.disabled = true;
  try {
    const body = verb === "reject" || reason ? { reason } : undefined;
    const r = await api("POST", `/proposals/${encodeURIComponent(p.id)}/${verb}`, body);
    await loadProposals(); // the list without it (pending), then the proposal with its decision
    await openProposal(p.id);
    out.classList.add("ok");
    out.textContent = verb === "approve"
      ? `Approved “${p.title}”: now memory ${r.memory_id} (${r.tier}).`
      : `Rejected “${p.title}”.`;
  } catch (e) {
    out.classList.add("bad");
    out.textContent = e.message;
  } finally {
    for (const b of [$("p-approve"), $("p-reject")]) b.disabled = false;
  }
}

// ----------------------------------------------------------------------------------- memories

async function loadMemories() {
  const [ns, listing] = await Promise.all([api("GET", "/review/namespaces"), listMemories()]);
  state.namespaces = ns.namespaces.map((n) => n.name);
  fillSelect($("m-namespace"), "all namespaces", ns.namespaces.map((n) => [n.name, `${n.name} (${n.entries})`]));
  fillSelect($("m-author"), "every author", listing.authors.map((a) => [a.author, `${a.author} (${a.entries})`]));
}

function fillSelect(select, none, options) {
  const keep = select.value;
  clear(select);
  select.append(el("option", { value: "" }, none));
  for (const [value, label] of options) select.append(el("option", { value }, label));
  select.value = options.some(([v]) => v === keep) ? keep : "";
}

async function listMemories() {
  const params = new URLSearchParams({ limit: "100" });
  if ($("m-namespace").value) params.append("namespace", $("m-namespace").value);
  if ($("m-author").value) params.append("author", $("m-author").value);
  const data = await api("GET", `/review/memories?${params}`);
  const who = $("m-author").value ? ` written by ${$("m-author").value}` : "";
  renderRows(data.entries, `Newest ${data.entries.length} active entries${who}`);
  return data;
}

async function search(event) {
  event.preventDefault();
  const q = $("q").value.trim();
  const asOfLocal = $("as-of").value;
  if (!q) {
    await listMemories();
    return;
  }
  const body = { query: q, limit: 25 };
  const namespaces = $("m-namespace").value ? [$("m-namespace").value] : state.namespaces.slice(0, 100);
  if (namespaces.length) body.namespaces = namespaces;
  if (asOfLocal) body.as_of = new Date(asOfLocal).toISOString();
  try {
    const data = await api("POST", "/search", body);
    let hits = data.hits;
    if ($("m-author").value) hits = hits.filter((h) => h.author === $("m-author").value);
    renderRows(hits, `${hits.length} hits for “${q}”` + (asOfLocal ? ` as of ${when(body.as_of)}` : ""));
  } catch (e) {
    renderRows([], e.message);
  }
}

function renderRows(entries, caption) {
  $("m-caption").textContent = caption;
  const rows = $("m-rows");
  clear(rows);
  for (const m of entries) {
    const tr = el(
      "tr",
      { dataset: { id: m.id } },
      el("td", { class: "title" }, m.title || m.excerpt || (m.body || "").slice(0, 120) || m.id),
      el("td", {}, m.kind),
      el("td", {}, m.author),
      el("td", {}, m.tier),
      el("td", {}, m.namespace),
      el("td", {}, when(m.created_at || m.valid_from))
    );
    tr.addEventListener("click", () => openMemory(m.id));
    rows.append(tr);
  }
}

async function openMemory(id) {
  for (const tr of document.querySelectorAll("#m-rows tr")) tr.classList.toggle("selected", tr.dataset.id === id);
  const d = await api("GET", `/memories/${encodeURIComponent(id)}`);
  const m = d.memory;
  $("memory").hidden = false;
  $("mem-title").textContent = m.title || m.id;
  $("mem-meta").textContent =
    `${m.kind} · ${m.tier} · ${m.namespace} · written by ${m.author} (${m.origin})` +
    (m.promoted_by ? ` · promoted by ${m.promoted_by}` : "") + ` · v${m.version} · ${m.status}`;
  $("mem-body").textContent = m.body;
  const ol = $("mem-history");
  clear(ol);
  const versions = [...d.history].sort((a, b) => a.version - b.version);
  for (const v of versions) {
    const current = v.id === m.id;
    ol.append(
      el(
        "li",
        { class: current ? "version current-version" : "version" },
        el("span", { class: current ? "current" : "" }, `v${v.version} · ${v.status}`),
        el("span", { class: "meta" }, ` · ${v.author} · ${when(v.created_at)}` +
          (v.status_reason ? ` · ${v.status_reason}` : "")),
        el("pre", { class: "body" }, v.body)
      )
    );
  }
  await loadExposure(id);
}

async function loadExposure(id) {
  // Which conversations were given this memory (ids, key names, times: the receipts hold no text).
  const rows = $("mem-exposure-rows");
  clear(rows);
  try {
    const x = await api("GET", `/memories/${encodeURIComponent(id)}/exposure`);
    const told = x.retracted ? `; ${x.noticed} told it was retracted (${x.retracted.status})` : "";
    $("mem-exposure-summary").textContent =
      `${x.count} conversation${x.count === 1 ? "" : "s"} of ${x.keys.length} key${x.keys.length === 1 ? "" : "s"}${told}` +
      (x.truncated ? " (newest receipts only)" : "");
    for (const c of x.conversations) {
      rows.append(
        el(
          "tr",
          {},
          el("td", { class: "meta" }, c.conversation.slice(0, 16)),
          el("td", {}, c.key),
          el("td", {}, c.api),
          el("td", {}, c.versions.map((v) => `v${v.version}`).join(", ")),
          el("td", {}, c.injections),
          el("td", {}, when(c.last_at)),
          el("td", {}, c.noticed_at ? when(c.noticed_at) : x.retracted ? "not yet" : "")
        )
      );
    }
  } catch (e) {
    $("mem-exposure-summary").textContent = e.message;
  }
}

// ------------------------------------------------------------------------------------- digest

function inline(text) {
  // `code` spans as <code>, the rest as text: the only inline markup the digest uses.
  return text.split("`").map((part, i) => (i % 2 ? el("code", {}, part) : document.createTextNode(part)));
}

function renderMarkdown(md, into) {
  // The digest's Markdown is headings, bullet lists and paragraphs (brain/jobs/digest.py render()).
  let list = null;
  for (const line of md.split("\n")) {
    const h = /^(#{1,3}) (.*)$/.exec(line);
    if (h) {
      list = null;
      into.append(el(`h${h[1].length}`, {}, h[2]));
    } else if (line.trimStart().startsWith("- ")) {
      if (!list) into.append((list = el("ul")));
      const nested = line.startsWith(" ");
      list.append(el("li", nested ? { class: "nested" } : {}, ...inline(line.trimStart().slice(2))));
    } else if (line.trim()) {
      list = null;
      into.append(el("p", {}, ...inline(line)));
    } else {
      list = null;
    }
  }
}

async function loadDigest() {
  const doc = $("digest-doc");
  clear(doc);
  $("digest-empty").hidden = true;
  try {
    // one digest per namespace: the one chosen in the memory browser, else the newest
    const ns = $("m-namespace").value;
    const d = await api("GET", "/digest/latest" + (ns ? `?namespace=${encodeURIComponent(ns)}` : ""));
    renderMarkdown(d.markdown, doc);
    const s = d.stats || {};
    const pct = (x) => (x === null || x === undefined ? "n/a" : `${Math.round(x * 100)}%`);
    const table = el("table", { class: "stats" });
    for (const [k, v] of [
      ["Week", s.week],
      ["Retrieval hit rate", pct(s.hitRate)],
      ["Proposal acceptance", pct(s.acceptanceRate)],
      ["Median hours to decision", s.medianHoursToDecision ?? "n/a"],
      ["Waiting proposals", s.pendingProposals ?? "n/a"],
    ]) table.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
    doc.append(el("h2", {}, "The numbers"), table, el("p", { class: "meta" }, `stored ${when(d.created_at)}`));
  } catch (e) {
    $("digest-empty").hidden = false;
    $("digest-empty").textContent = e.message;
  }
}

// -------------------------------------------------------------------------------------- wiring

document.addEventListener("DOMContentLoaded", async () => {
  $("login-form").addEventListener("submit", signIn);
  $("signout").addEventListener("click", () => signOut());
  $("proposal-status").addEventListener("change", () => loadProposals());
  $("p-approve").addEventListener("click", () => decide("approve"));
  $("p-reject").addEventListener("click", () => decide("reject"));
  $("search-form").addEventListener("submit", search);
  $("m-namespace").addEventListener("change", () => listMemories());
  $("m-author").addEventListener("change", () => listMemories());
  window.addEventListener("hashchange", () => {
    if (sessionStorage.getItem(KEY)) show(location.hash.slice(1));
  });
  if (!sessionStorage.getItem(KEY)) return;
  try {
    await enter(await api("GET", "/review/session"));
  } catch (e) {
    signOut(e.message);
  }
});
