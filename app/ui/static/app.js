// CoDreamer dashboard: runs, a run's reward curve, emails and node scores, updated live from the
// run's Server-Sent Events. Plain DOM, no framework and no build step.
"use strict";

const KEY = "codreamer.apiKey";
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const TERMINAL_EVENTS = new Set(["run.succeeded", "run.failed", "run.cancelled"]);
const SVG = "http://www.w3.org/2000/svg";

// ---------------------------------------------------------------- DOM helpers

/** An element with attributes (`on*` functions become listeners) and children (strings become text). */
function h(tag, attrs = {}, ...children) {
  const el = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const $ = (selector) => document.querySelector(selector);
const fmt = (x, digits = 3) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "–");
const card = (title, ...children) => h("section", { class: "card" }, h("h2", {}, title), ...children);

function showError(message) {
  const box = $("#error");
  box.textContent = message || "";
  box.hidden = !message;
}

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** fetch() relative to the page (so a path prefix works), with the API key when one was entered. */
async function api(path, { json, headers = {}, ...options } = {}) {
  const key = sessionStorage.getItem(KEY);
  const all = new Headers(headers);
  if (key) all.set("Authorization", `Bearer ${key}`);
  if (json !== undefined) {
    all.set("Content-Type", "application/json");
    options.body = JSON.stringify(json);
  }
  const response = await fetch(new URL(path, document.baseURI), { ...options, headers: all });
  if (response.status === 401) {
    if (sessionStorage.getItem(KEY) === key) askForKey(key ? "That API key was refused." : "This service needs an API key.");
    throw new ApiError(401, "API key required");
  }
  if (!response.ok && response.status !== 204) {
    let detail = response.statusText;
    try {
      const body = await response.json();
      detail = Array.isArray(body.detail)
        ? body.detail.map((e) => `${(e.loc || []).slice(1).join(".")}: ${e.msg}`).join("; ")
        : body.detail;
    } catch (_) { /* not JSON */ }
    throw new ApiError(response.status, `${response.status}: ${detail}`);
  }
  return response;
}

const getJSON = async (path, options) => (await api(path, options)).json();

function askForKey(message) {
  $("#key-message").textContent = message;
  $("#key-form").hidden = false;
  $("#key-input").focus();
}

/**
 * Follows a run's events: fetch() with `Accept: text/event-stream` (EventSource cannot send the
 * Authorization header), parsed from the ReadableStream; reconnects with Last-Event-ID until a
 * terminal event, a 204 or `signal` aborts.
 */
async function followEvents(runId, onEvent, signal) {
  let lastId = null;
  let ended = false;
  while (!ended && !signal.aborted) {
    try {
      const headers = { Accept: "text/event-stream" };
      if (lastId !== null) headers["Last-Event-ID"] = lastId;
      const response = await api(`runs/${encodeURIComponent(runId)}/events`, { headers, signal });
      if (response.status === 204) return;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let event = { data: [] };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        const lines = buffer.split("\n");
        buffer = lines.pop();
        for (const raw of lines) {
          const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
          if (line === "") {  // blank line: dispatch
            if (event.data.length) {
              if (event.id !== undefined) lastId = event.id;
              onEvent(event.type || "message", JSON.parse(event.data.join("\n")));
              if (TERMINAL_EVENTS.has(event.type)) ended = true;
            }
            event = { data: [] };
          } else if (!line.startsWith(":")) {  // ":" starts a comment (keep-alive)
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "data") event.data.push(text);
            else if (field === "event") event.type = text;
            else if (field === "id") event.id = text;
          }
        }
      }
    } catch (error) {
      if (signal.aborted || error.status === 401 || error.status === 404) return;
    }
    if (!ended) await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

// ---------------------------------------------------------------- word diff

const tokens = (text) => text.match(/\s+|[^\s]+/g) || [];

/** [op, text] pieces turning `before` into `after`, word by word (longest common subsequence). */
function wordDiff(before, after) {
  const a = tokens(before);
  const b = tokens(after);
  const n = a.length;
  const m = b.length;
  if (n * m > 4_000_000) return [["del", before], ["ins", after]];
  const width = m + 1;
  const common = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      common[i * width + j] = a[i] === b[j]
        ? common[(i + 1) * width + j + 1] + 1
        : Math.max(common[(i + 1) * width + j], common[i * width + j + 1]);
    }
  }
  const pieces = [];
  const push = (op, text) => {
    const last = pieces[pieces.length - 1];
    if (last && last[0] === op) last[1] += text;
    else pieces.push([op, text]);
  };
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) { push("same", a[i]); i++; j++; }
    else if (j >= m || (i < n && common[(i + 1) * width + j] >= common[i * width + j + 1])) push("del", a[i++]);
    else push("ins", b[j++]);
  }
  return tidy(pieces);
}

/** One deletion then one insertion per changed stretch: a single space between two changes joins them. */
function tidy(pieces) {
  const out = [];
  let del = "";
  let ins = "";
  const flush = () => {
    if (del) out.push(["del", del]);
    if (ins) out.push(["ins", ins]);
    del = ins = "";
  };
  pieces.forEach(([op, text], k) => {
    if (op === "del") del += text;
    else if (op === "ins") ins += text;
    else if ((del || ins) && /^\s+$/.test(text) && k + 1 < pieces.length) { del += text; ins += text; }
    else { flush(); out.push([op, text]); }
  });
  flush();
  return out;
}

const renderDiff = (pieces) => pieces.map(([op, text]) => (op === "same" ? text : h(op, {}, text)));

// ---------------------------------------------------------------- views

let view = { abort: new AbortController(), timers: [] };

function newView() {
  view.abort.abort();
  view.timers.forEach(clearInterval);
  view = { abort: new AbortController(), timers: [] };
  showError("");
  return view;
}

function route() {
  const run = location.hash.match(/^#\/runs\/([^/]+)$/);
  const batch = location.hash.match(/^#\/batches\/([^/]+)$/);
  const current = newView();
  const shown = run ? showRun(decodeURIComponent(run[1]), current)
    : batch ? showBatch(decodeURIComponent(batch[1]), current) : showRuns(current);
  shown.catch((error) => { if (!current.abort.signal.aborted && error.status !== 401) showError(error.message); });
}

const badge = (status) => h("span", { class: `badge ${status}` }, status);

function progress(run) {
  const bar = h("span", { class: "bar" }, h("span", {}));
  bar.firstChild.style.width = `${(100 * run.iterations_completed) / Math.max(run.iterations_total, 1)}%`;
  return h("span", { class: "progress" }, bar, ` ${run.iterations_completed} / ${run.iterations_total}`);
}

// --- the runs list and the start form

async function showRuns(current) {
  const rows = h("tbody", { id: "runs" });
  const deployments = h("div", { id: "deployments" });
  const batches = h("tbody", { id: "batches" });
  $("#app").replaceChildren(
    startForm(),
    deployments,
    card("Runs", h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Run"), h("th", {}, "Status"), h("th", {}, "Progress"),
        h("th", {}, "Graph"), h("th", {}, "Created"))),
      rows)),
    card("Draft batches", h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Batch"), h("th", {}, "Status"), h("th", {}, "Drafted"),
        h("th", {}, "Graph"), h("th", {}, "Policy"), h("th", {}, "Created"))),
      batches)),
  );
  const refreshBatches = async () => {
    const { data } = await getJSON("draft-batches?limit=20");
    batches.replaceChildren(...data.map((batch) => h("tr", {},
      h("td", {}, h("a", { href: `#/batches/${batch.batch_id}`, class: "mono" }, batch.batch_id)),
      h("td", {}, badge(batch.status)),
      h("td", { class: "num" }, `${batch.completed} / ${batch.count}`),
      h("td", {}, batch.graph_id), h("td", { class: "mono" }, batch.policy), h("td", {}, when(batch.created_at)))));
    if (!data.length) {
      batches.append(h("tr", {}, h("td", { colspan: 6, class: "muted" },
        "No draft batches yet: POST /drafts your prospects (docs/guide/drafts.md).")));
    }
  };
  refreshBatches().catch((e) => { if (e.status !== 401) showError(e.message); });
  current.timers.push(setInterval(() => refreshBatches().catch(() => {}), 5000));
  const refresh = async () => {
    const { data } = await getJSON("runs?limit=50");
    rows.replaceChildren(...data.map((run) => h("tr", {},
      h("td", {}, h("a", { href: `#/runs/${run.run_id}`, class: "mono" }, run.run_id)),
      h("td", {}, badge(run.status)),
      h("td", {}, progress(run)),
      h("td", {}, run.config.graph_id),
      h("td", {}, when(run.created_at)),
    )));
    if (!data.length) rows.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No runs yet: start one above.")));
  };
  await refresh();
  current.timers.push(setInterval(() => refresh().catch(() => {}), 3000));
  showDeployments(deployments).catch((e) => { if (e.status !== 401) showError(e.message); });
}

// --- each graph's deployment: the champion, its challengers, their traffic, and the latest evaluation's intervals

const interval = (i) => (i ? `${i.value.toFixed(3)} [${i.low.toFixed(3)}, ${i.high.toFixed(3)}]` : "–");

/** The latest promotions and rollbacks of the history (newest first): the entries whose champion is new, each the
 *  graph's `policy.promoted` or `policy.rolled_back` event; a deployment that kept its champion is none. */
function promotions(history) {
  const promoted = history.filter((d, i) => i === history.length - 1 || d.policy !== history[i + 1].policy);
  const shown = promoted.slice(0, 5).map((d) => h("li", {},
    `${when(d.deployed_at)}: ${d.rollback ? "rolled back to" : "promoted"} `, h("span", { class: "mono" }, d.policy),
    d.trigger === "auto_promote" ? " by auto-promotion" : " by request",
    d.forced ? ", forced" : (d.evaluation ? `, on evaluation ${d.evaluation}` : "")));
  return shown.length ? h("ol", { class: "history" }, ...shown) : null;
}

async function showDeployments(into) {
  const { data: graphs } = await getJSON("graphs");
  const cards = [];
  for (const graph of graphs) {
    const deployment = await getJSON(`graphs/${encodeURIComponent(graph.id)}/deployment`);
    if (!deployment.policy) continue;
    const { data: [evaluation] } = await getJSON(`evaluations?graph_id=${encodeURIComponent(graph.id)}&limit=1`);
    const found = {};
    for (const p of (evaluation && evaluation.result && evaluation.result.policies) || []) found[p.policy] = p;
    const auto = deployment.traffic === "auto";
    const arms = [{ role: "champion", policy: deployment.policy, share: deployment.share },
      ...deployment.challengers.map((c) => ({ role: "challenger", ...c }))];
    const rows = arms.map((arm) => {
      const seen = found[arm.policy];
      const off = seen && (seen.off_policy.dr || seen.off_policy.snips);
      return h("tr", { class: arm.role },
        h("td", {}, arm.role), h("td", { class: "mono" }, arm.policy),
        h("td", {}, auto ? "auto" : `${Math.round(100 * arm.share)} %`),
        h("td", {}, interval(seen && seen.judge)), h("td", {}, interval(seen && seen.predicted_reply)),
        h("td", { class: "off-policy" }, off ? interval(off) : (seen ? seen.off_policy.reason : "–")));
    });
    cards.push(card(`Deployment on ${graph.name}`, h("table", {},
      h("thead", {}, h("tr", {}, ...["Role", "Policy", "Traffic", "Judge", "Predicted reply rate",
        "Reply rate, off-policy (90 %)"].map((t) => h("th", {}, t)))),
      h("tbody", {}, ...rows)),
    h("p", { class: "muted" }, (deployment.require_evidence
      ? `A new champion needs evidence${deployment.sequential ? " (always-valid intervals)" : ""}. ` : "")
      + (evaluation ? `Evaluated ${when(evaluation.created_at)} (${evaluation.status}).` : "Not evaluated yet.")),
    promotions(deployment.history)));
  }
  into.replaceChildren(...cards);
}

function startForm() {
  const graph = h("select", { id: "graph", required: true });
  const scenario = h("select", { id: "scenario" });
  const iterations = h("input", { id: "iterations", type: "number", min: 1, max: 200, value: 3, required: true });
  const rollouts = h("input", { id: "rollouts", type: "number", min: 2, max: 64, value: 4, required: true });
  const message = h("span", { class: "muted" });

  const loadScenarios = async () => {
    const { data } = await getJSON(`graphs/${encodeURIComponent(graph.value)}/scenarios`);
    scenario.replaceChildren(
      ...data.map((s) => h("option", { value: s.id }, `${s.prospect.name}, ${s.prospect.role} at ${s.prospect.company}`)),
      h("option", { value: "" }, "All scenarios"),
    );
  };
  graph.addEventListener("change", () => loadScenarios().catch((e) => showError(e.message)));
  getJSON("graphs").then(async ({ data }) => {
    graph.replaceChildren(...data.map((g) => h("option", { value: g.id }, `${g.name} (${g.nodes} nodes)`)));
    await loadScenarios();
  }).catch((e) => { if (e.status !== 401) showError(e.message); });

  const submit = async (event) => {
    event.preventDefault();
    message.textContent = "Starting…";
    const body = { graph_id: graph.value, iterations: Number(iterations.value), rollouts_per_group: Number(rollouts.value) };
    if (scenario.value) body.scenario_ids = [scenario.value];
    try {
      const created = await getJSON("learn-loop", { method: "POST", json: body });
      location.hash = `#/runs/${created.run_id}`;
    } catch (error) {
      message.textContent = "";
      if (error.status !== 401) showError(error.message);
    }
  };
  return h("section", { class: "card" }, h("h2", {}, "Start a learning loop"),
    h("form", { id: "start-form", class: "inline", onsubmit: submit },
      h("label", {}, "Graph ", graph), h("label", {}, "Scenario ", scenario),
      h("label", {}, "Iterations ", iterations), h("label", {}, "Rollouts per group ", rollouts),
      h("button", { type: "submit" }, "Start"), message));
}

// --- one run

async function showRun(runId, current) {
  const state = { run: null, iterations: [], deliveries: [], outcomes: null, selected: null, fact: null, scores: {} };
  const path = `runs/${encodeURIComponent(runId)}`;
  const sections = {
    summary: h("div"), chart: h("div"), email: h("div"), nodes: h("div"), iterations: h("div"), webhooks: h("div"),
    outcomes: h("div"),
  };
  $("#app").replaceChildren(
    sections.summary,
    h("div", { class: "grid" }, sections.chart, sections.nodes),
    sections.email,
    h("div", { class: "grid" }, sections.iterations, sections.outcomes),
    sections.webhooks,
  );

  const render = () => {
    const shown = state.iterations.find((it) => it.iteration === state.selected) || finalIteration(state.run, state.iterations);
    sections.summary.replaceChildren(summary(state.run, refresh));
    sections.chart.replaceChildren(rewardChart(state.run, state.iterations, select));
    sections.email.replaceChildren(emailCard(state, shown, select, showFact));
    sections.nodes.replaceChildren(nodeScores(shown, shown && scoresAround(shown.iteration)));
    sections.iterations.replaceChildren(iterationTable(state.iterations, shown, select));
    sections.webhooks.replaceChildren(webhookTable(state.run, state.deliveries));
    sections.outcomes.replaceChildren(outcomesChart(state.outcomes, select));
  };
  const select = (iteration) => { state.selected = iteration; render(); };
  // Every node's score after iteration k and after k - 1, fetched once each (a recorded iteration never changes).
  const scoresAround = (k) => {
    const wanted = k > 0 ? [k, k - 1] : [k];
    const missing = wanted.filter((i) => state.scores[i] === undefined);
    if (!missing.length) return wanted.every((i) => state.scores[i]) && { after: state.scores[k], before: state.scores[k - 1] };
    for (const i of missing) {
      state.scores[i] = null;  // loading
      getJSON(`${path}/node-scores?iteration=${i}`)
        .then(({ scores }) => { state.scores[i] = scores; render(); })
        .catch((error) => { delete state.scores[i]; showError(error.message); });
    }
    return null;
  };
  const showFact = async (nodeId) => {
    state.fact = { id: nodeId, loading: true };
    render();
    try {
      state.fact = await getJSON(`graphs/${encodeURIComponent(state.run.config.graph_id)}/nodes/${encodeURIComponent(nodeId)}`);
    } catch (error) {
      state.fact = { id: nodeId, error: error.message };
    }
    render();
  };

  let pending = null;
  async function refresh() {
    const [run, iterations, deliveries, outcomes] = await Promise.all([
      getJSON(path), getJSON(`${path}/iterations`), getJSON(`${path}/webhook-deliveries`), getJSON(`${path}/outcomes`),
    ]);
    if (current.abort.signal.aborted) return;
    Object.assign(state, { run, iterations: iterations.data, deliveries: deliveries.data, outcomes });
    render();
  }
  // Many events can arrive at once (a reconnect, a finished run): one refresh for a burst.
  const refreshSoon = () => {
    if (!pending) pending = setTimeout(() => { pending = null; refresh().catch((e) => showError(e.message)); }, 150);
  };

  await refresh();
  if (!TERMINAL.has(state.run.status)) {
    followEvents(runId, refreshSoon, current.abort.signal).then(() => {
      if (!current.abort.signal.aborted) refreshSoon();
    });
    current.timers.push(setInterval(() => refreshSoon(), 15000));  // deliveries change without events
  }
}

/** The iteration that published the run's final email (the latest one while the run is not finished). */
function finalIteration(run, iterations) {
  const final = run.final_email;
  const same = (it) => final && it.email && (final.iteration !== undefined
    ? it.iteration === final.iteration : it.email.subject === final.subject && it.email.body === final.body);
  return iterations.slice().reverse().find(same) || iterations[iterations.length - 1];
}

function summary(run, refresh) {
  const cancel = async () => {
    try {
      await api(`runs/${encodeURIComponent(run.run_id)}/cancel`, { method: "POST" });
      await refresh();
    } catch (error) { showError(error.message); }
  };
  const scenario = run.config.target_scenario_id;
  return h("section", { class: "card summary" },
    h("h2", {}, "Run ", h("span", { class: "mono" }, run.run_id)),
    h("dl", {},
      h("dt", {}, "Status"), h("dd", {}, h("span", { id: "status", class: `badge ${run.status}` }, run.status)),
      h("dt", {}, "Progress"), h("dd", { id: "progress" }, progress(run)),
      h("dt", {}, "Graph"), h("dd", {}, run.config.graph_id),
      h("dt", {}, "Target"), h("dd", {}, scenario),
      h("dt", {}, "Backend"), h("dd", {}, `${run.config.backend}, K = ${run.config.rollouts_per_group}`),
      h("dt", {}, "Started"), h("dd", {}, when(run.started_at)),
      h("dt", {}, "Finished"), h("dd", {}, when(run.finished_at)),
    ),
    run.waiting && h("p", { id: "waiting", class: "muted" },
      `Waiting for outcomes of iteration ${run.waiting.iteration}: ${run.waiting.min_delivered} deliveries, `
      + `until ${when(run.waiting.until)}`),
    run.error && h("p", { class: "error" }, `Failed at ${run.error.step || "?"}: ${run.error.message}`),
    !TERMINAL.has(run.status) && h("button", { type: "button", class: "quiet", onclick: cancel }, "Cancel run"),
  );
}

/** Mean reward per training iteration as a line, min–max as a band, drawn in SVG. */
function rewardChart(run, iterations, select) {
  const points = iterations.filter((it) => it.rewards);
  const width = 560;
  const height = 240;
  const pad = { left: 44, right: 16, top: 12, bottom: 32 };
  const lastX = Math.max(run.iterations_total, points.length ? points[points.length - 1].iteration : 1, 1);
  let low = Math.min(0, ...points.map((p) => p.rewards.min));
  let high = Math.max(1, ...points.map((p) => p.rewards.max));
  [low, high] = [Math.floor(low * 4) / 4, Math.ceil(high * 4) / 4];
  const x = (i) => pad.left + (lastX === 1 ? 0.5 : (i - 1) / (lastX - 1)) * (width - pad.left - pad.right);
  const y = (v) => pad.top + (1 - (v - low) / (high - low || 1)) * (height - pad.top - pad.bottom);

  const svg = h("svg:svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img",
    "aria-label": `Reward per iteration, ${points.length} of ${run.iterations_total}` });
  for (let k = 0; k <= 4; k++) {
    const v = low + ((high - low) * k) / 4;
    svg.append(h("svg:line", { x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v), class: "grid" }),
      h("svg:text", { x: pad.left - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, v.toFixed(2)));
  }
  const step = Math.ceil(lastX / 10);
  for (let i = 1; i <= lastX; i += step) {
    svg.append(h("svg:text", { x: x(i), y: height - pad.bottom + 16, class: "tick", "text-anchor": "middle" }, i));
  }
  svg.append(h("svg:text", { x: width - pad.right, y: height - 4, class: "tick", "text-anchor": "end" }, "iteration"));
  if (points.length) {
    const band = [...points.map((p) => `${x(p.iteration)},${y(p.rewards.max)}`),
      ...points.slice().reverse().map((p) => `${x(p.iteration)},${y(p.rewards.min)}`)];
    svg.append(h("svg:polygon", { points: band.join(" "), class: "band" }),
      h("svg:polyline", { points: points.map((p) => `${x(p.iteration)},${y(p.rewards.mean)}`).join(" "), class: "mean" }));
    for (const p of points) {
      svg.append(h("svg:circle", { cx: x(p.iteration), cy: y(p.rewards.mean), r: 4.5, class: "point",
        "data-iteration": p.iteration, onclick: () => select(p.iteration) },
        h("svg:title", {}, `Iteration ${p.iteration}: mean ${fmt(p.rewards.mean)}, min ${fmt(p.rewards.min)}, max ${fmt(p.rewards.max)}`)));
    }
  }
  return card("Reward", svg, h("p", { class: "legend" },
    h("span", { class: "swatch mean" }), "mean ", h("span", { class: "swatch band" }), "min–max across rollouts"));
}

/** Sends, deliveries, opens, clicks and replies summed over the run, as labelled bars: readable at a few sends. */
function outcomeFunnel(sent) {
  const total = (key) => sent.reduce((sum, e) => sum + (e[key] || 0), 0);
  const steps = [["sends", "sent"], ["delivered", "delivered"], ["opens", "opened (people)"], ["clicks", "clicked"],
    ["replies", "replied"], ["positive_replies", "positive replies"], ["bounces", "bounced"]];
  const top = Math.max(total("sends"), total("delivered"), 1);
  return h("table", { id: "outcome-funnel" }, h("tbody", {}, steps.map(([key, label]) => {
    const n = total(key);
    const bar = h("span", { class: "bar wide" }, h("span", {}));
    bar.firstChild.style.width = `${(100 * n) / top}%`;
    return h("tr", { "data-step": key }, h("td", {}, label), h("td", {}, bar), h("td", { class: "num" }, n));
  })));
}

/** Reply rate (with its 95 % interval) of each sent published email per iteration, on a scale fitted to the rates,
 *  and the judge score on its own 0–1 scale at the right; the totals below as labelled bars. */
function outcomesChart(outcomes, select) {
  const sent = outcomes ? outcomes.data.slice().sort((a, b) => a.iteration - b.iteration) : [];
  if (!sent.length) {
    return card("Outcomes", h("p", { class: "muted" },
      "No outcomes yet: report opens and replies of the emails you send (see docs/guide/outcomes.md), or run on the demo."));
  }
  const width = 560;
  const height = 220;
  const pad = { left: 52, right: 44, top: 14, bottom: 34 };
  const first = sent[0].iteration;
  const last = sent[sent.length - 1].iteration;
  const span = Math.max(last - first, 1);
  const inner = width - pad.left - pad.right;
  // a lone iteration in the middle; several spread with half a step of margin, so no point sits on an axis
  const x = (i) => pad.left + (last === first ? inner / 2 : ((i - first + 0.5) / (span + 1)) * inner);
  const replied = sent.filter((e) => e.reply_rate !== null);
  const highest = Math.max(0.05, ...replied.map((e) => e.reply_rate_interval[1]));
  const niceTop = [0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1].find((v) => v >= highest) || 1;
  const y = (v) => pad.top + (1 - v / niceTop) * (height - pad.top - pad.bottom);
  const yJudge = (v) => pad.top + (1 - v) * (height - pad.top - pad.bottom);
  const svg = h("svg:svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", id: "outcomes-chart",
    "aria-label": `Reply rate and judge score of ${sent.length} sent emails` });
  for (let k = 0; k <= 4; k++) {
    const v = (niceTop * k) / 4;
    svg.append(h("svg:line", { x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v), class: "grid" }),
      h("svg:text", { x: pad.left - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, `${Math.round(v * 1000) / 10} %`),
      h("svg:text", { x: width - pad.right + 6, y: y(v) + 4, class: "tick judge-tick" }, (k / 4).toFixed(2)));
  }
  const step = Math.ceil((span + 1) / 10);
  for (let i = first; i <= last; i += step) {
    svg.append(h("svg:text", { x: x(i), y: height - pad.bottom + 16, class: "tick", "text-anchor": "middle" }, i));
  }
  svg.append(h("svg:text", { x: width - pad.right, y: height - 4, class: "tick", "text-anchor": "end" }, "iteration"),
    h("svg:text", { x: 4, y: pad.top - 4, class: "tick" }, "reply rate"),
    h("svg:text", { x: width - 4, y: pad.top - 4, class: "tick", "text-anchor": "end" }, "judge"));
  const line = (points, cls) => points.length > 1 && h("svg:polyline", { points: points.join(" "), class: cls });
  const judged = sent.filter((e) => e.judge_score !== null);
  svg.append(...[
    line(replied.map((e) => `${x(e.iteration)},${y(e.reply_rate)}`), "reply"),
    line(judged.map((e) => `${x(e.iteration)},${yJudge(e.judge_score)}`), "judge"),
  ].filter(Boolean));
  for (const e of judged) svg.append(h("svg:circle", { cx: x(e.iteration), cy: yJudge(e.judge_score), r: 3, class: "judge-point" }));
  for (const e of replied) {
    const [low, high] = e.reply_rate_interval;
    const cx = x(e.iteration);
    svg.append(h("svg:line", { x1: cx, x2: cx, y1: y(low), y2: y(high), class: "interval" }),
      h("svg:line", { x1: cx - 5, x2: cx + 5, y1: y(low), y2: y(low), class: "interval" }),
      h("svg:line", { x1: cx - 5, x2: cx + 5, y1: y(high), y2: y(high), class: "interval" }),
      h("svg:circle", { cx, cy: y(e.reply_rate), r: 4.5, class: "reply-point", "data-iteration": e.iteration,
        onclick: () => select(e.iteration) },
      h("svg:title", {}, `Iteration ${e.iteration}: ${e.replies} replies of ${e.delivered} delivered `
        + `(${percent(e.reply_rate)}, 95 % interval ${percent(low)}–${percent(high)}), ${e.opens} human opens, `
        + `judge ${e.judge_score === null ? "–" : fmt(e.judge_score)}`)));
    if (replied.length <= 3) {  // few points: each says its figures beside it
      svg.append(h("svg:text", { x: cx + 10, y: y(e.reply_rate) + 4, class: "point-label" },
        `${percent(e.reply_rate)} · ${e.replies} of ${e.delivered}`));
    }
  }
  const rho = outcomes.calibration.spearman;
  return card("Outcomes", svg, h("p", { class: "legend" },
    h("span", { class: "swatch reply" }), "reply rate (95 % interval, left scale) ", h("span", { class: "swatch judge" }),
    "judge score (right scale)",
    h("span", { id: "calibration", class: "muted" }, rho === null
      ? ` · judge and replies: too few sent emails to compare (${outcomes.calibration.n})`
      : ` · rank correlation of judge and replies: ${rho.toFixed(2)} over ${outcomes.calibration.n} emails`)),
  outcomeFunnel(sent));
}

function emailCard(state, shown, select, showFact) {
  if (!shown) return card("Email", h("p", { class: "muted" }, "No email yet: the baseline is being written."));
  const previous = state.iterations.find((it) => it.iteration === shown.iteration - 1);
  const email = shown.email || { subject: "", body: "", citations: [] };
  const before = previous && previous.email;
  const changedSubject = before && before.subject !== email.subject;
  const nav = h("div", { class: "iteration-nav" },
    h("button", { type: "button", class: "quiet", disabled: !previous, onclick: () => select(shown.iteration - 1) }, "◀"),
    h("strong", { id: "email-iteration" }, shown.iteration === 0 ? "Iteration 0 (baseline)" : `Iteration ${shown.iteration}`),
    shown === finalIteration(state.run, state.iterations) && state.run.final_email ? h("span", { class: "badge succeeded" }, "final") : null,
    h("button", { type: "button", class: "quiet", disabled: shown === state.iterations[state.iterations.length - 1],
      onclick: () => select(shown.iteration + 1) }, "▶"),
    before ? h("span", { class: "muted" }, " changes from iteration ", shown.iteration - 1, " marked: ",
      h("ins", {}, "added"), " ", h("del", {}, "removed")) : null);
  const cited = new Set(email.citations);
  const fact = state.fact && cited.has(state.fact.id) ? factCard(state.fact) : null;
  return card("Published email", nav,
    h("h3", { id: "email-subject" }, email.subject),
    h("p", { id: "email-score", class: "muted" }, typeof email.score === "number"
      ? `Judge score ${email.score.toFixed(2)}` : "Judge score: not judged"),
    changedSubject ? h("p", { class: "was" }, "was: ", h("del", {}, before.subject)) : null,
    h("div", { id: "email-body", class: "email" }, before ? renderDiff(wordDiff(before.body, email.body)) : email.body),
    h("p", { class: "citations" }, "Cites: ", email.citations.length ? email.citations.map((id) =>
      h("a", { href: "#", class: `cite${state.fact && state.fact.id === id ? " active" : ""}`, "data-node": id,
        onclick: (event) => { event.preventDefault(); showFact(id); } }, id)) : h("span", { class: "muted" }, "nothing")),
    fact);
}

function factCard(node) {
  if (node.loading) return h("div", { class: "fact muted" }, `Loading ${node.id}…`);
  if (node.error) return h("div", { class: "fact error" }, node.error);
  return h("div", { class: "fact", id: "fact" },
    h("h4", {}, node.title, " ", h("span", { class: "muted" }, `(${node.type})`)),
    h("p", {}, node.text),
    node.tags.length ? h("p", { class: "muted" }, "Tags: ", node.tags.join(", ")) : null,
    node.neighbors.length ? h("p", { class: "muted" }, "Related: ",
      node.neighbors.map((n) => `${n.relation} ${n.direction === "out" ? "→" : "←"} ${n.id}`).join("; ")) : null);
}

/** The ten highest node scores after the shown iteration and how they moved in it. */
function nodeScores(shown, scores) {
  if (!shown) return card("Top nodes", h("p", { class: "muted" }, "Every node starts at 1.0."));
  if (!scores) return card("Top nodes", h("p", { class: "muted" }, "Loading scores…"));
  const top = Object.entries(scores.after).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, 10);
  const max = Math.max(...top.map(([, score]) => score), 1e-9);
  const cited = new Set((shown.email && shown.email.citations) || []);
  return card(`Top nodes after iteration ${shown.iteration}`, h("table", { id: "node-scores" }, h("tbody", {},
    top.map(([id, score]) => {
      const delta = scores.before ? score - (scores.before[id] ?? 1.0) : 0;
      const bar = h("span", { class: "bar" }, h("span", {}));
      bar.firstChild.style.width = `${(100 * score) / max}%`;
      return h("tr", {},
        h("td", { class: `mono${cited.has(id) ? " cited" : ""}`, title: cited.has(id) ? "cited by this email" : null }, id),
        h("td", {}, bar), h("td", { class: "num" }, fmt(score, 2)),
        h("td", { class: `num ${delta > 1e-9 ? "up" : delta < -1e-9 ? "down" : "muted"}` },
          Math.abs(delta) < 1e-9 ? "–" : `${delta > 0 ? "▲ +" : "▼ "}${fmt(delta, 2)}`));
    }))));
}

function iterationTable(iterations, shown, select) {
  const training = (t) => {
    if (!t) return h("span", { class: "muted" }, "baseline");
    if (t.skipped) return h("span", { class: "skipped" }, `skipped: ${t.reason || "no reason given"}`);
    const m = t.metrics || {};
    return `step ${t.step}` + (m.loss !== undefined ? `, loss ${fmt(m.loss)}` : "") +
      (m.groups_skipped ? `, ${m.groups_skipped} groups skipped` : "");
  };
  // How the rollouts ended and how the judge fared: what to look at when a model or a judge misbehaves.
  const rollouts = (m) => {
    if (!m || m.rollouts === undefined) return h("span", { class: "muted" }, "–");
    const ends = [["finalized", "finalized"], ["parsed_from_text", "from text"], ["structured", "as JSON"], ["out_of_turns", "out of turns"],
      ["cut_by_length", "cut at the token limit"], ["context_full", "context full"]].filter(([key]) => m[`end/${key}`]).map(([key, label]) => `${m[`end/${key}`]} ${label}`);
    const judge = m["judge/dropped"] ? [`judge dropped ${m["judge/dropped"]} of ${m["judge/groups"]}`] : [];
    return [...ends, ...judge].join(" · ") || "–";
  };
  return card("Iterations", h("table", { id: "iterations" },
    h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "Mean"), h("th", {}, "Min–max"), h("th", {}, "Training"),
      h("th", {}, "Rollouts"))),
    h("tbody", {}, iterations.map((it) => h("tr", {
      class: `clickable${shown && it.iteration === shown.iteration ? " selected" : ""}`, onclick: () => select(it.iteration),
    },
    h("td", {}, it.iteration), h("td", { class: "num" }, fmt(it.rewards && it.rewards.mean)),
    h("td", { class: "num" }, it.rewards ? `${fmt(it.rewards.min)}–${fmt(it.rewards.max)}` : "–"),
    h("td", {}, training(it.training)), h("td", {}, rollouts(it.metrics)))))));
}

function webhookTable(run, deliveries) {
  if (!run.config.webhook_url) return card("Webhook deliveries", h("p", { class: "muted" }, "This run has no webhook."));
  return card("Webhook deliveries", h("p", { class: "muted mono" }, run.config.webhook_url), h("table", { id: "deliveries" },
    h("thead", {}, h("tr", {}, h("th", {}, "Event"), h("th", {}, "Status"), h("th", {}, "Attempts"), h("th", {}, "Last answer"))),
    h("tbody", {}, deliveries.map((d) => h("tr", {},
      h("td", {}, d.type), h("td", {}, h("span", { class: `badge ${d.status}` }, d.status)), h("td", { class: "num" }, d.attempts),
      h("td", {}, d.last_status_code ?? d.last_error ?? (d.next_attempt_at ? `next ${when(d.next_attempt_at)}` : "–")))))));
}

// --- one draft batch: each prospect's draft, what it earned, and the replies by category

const percent = (x) => (x === null || x === undefined ? "–" : `${(100 * x).toFixed(1)} %`);

async function showBatch(batchId, current) {
  const path = `draft-batches/${encodeURIComponent(batchId)}`;
  const sections = { summary: h("div"), replies: h("div"), drafts: h("div") };
  $("#app").replaceChildren(sections.summary, sections.replies, sections.drafts);
  const refresh = async () => {
    const [batch, drafts, outcomes] = await Promise.all([
      getJSON(path), getJSON(`${path}/drafts?limit=1000`), getJSON(`${path}/outcomes`),
    ]);
    if (current.abort.signal.aborted) return batch;
    const earned = {};
    for (const o of outcomes.data) earned[o.prospect_id] = o;
    sections.summary.replaceChildren(batchSummary(batch, path));
    sections.replies.replaceChildren(repliesByCategory(outcomes.data));
    sections.drafts.replaceChildren(draftTable(drafts.data, earned));
    return batch;
  };
  const batch = await refresh();
  if (batch.status === "queued" || batch.status === "running") {
    current.timers.push(setInterval(() => refresh().catch((e) => showError(e.message)), 2000));
  } else {
    current.timers.push(setInterval(() => refresh().catch(() => {}), 15000));  // outcomes keep arriving
  }
}

function batchSummary(batch, path) {
  const download = async (layout) => {
    try {
      const response = await api(`${path}/drafts?layout=${layout}`, { headers: { Accept: "text/csv" } });
      const link = h("a", { href: URL.createObjectURL(await response.blob()), download: `${batch.batch_id}-${layout}.csv` });
      link.click();
      URL.revokeObjectURL(link.href);
    } catch (error) { showError(error.message); }
  };
  return h("section", { class: "card summary" },
    h("h2", {}, "Draft batch ", h("span", { class: "mono" }, batch.batch_id)),
    h("dl", {},
      h("dt", {}, "Status"), h("dd", {}, h("span", { id: "batch-status", class: `badge ${batch.status}` }, batch.status)),
      h("dt", {}, "Drafted"), h("dd", { id: "batch-progress" }, `${batch.completed} / ${batch.count}`),
      h("dt", {}, "Graph"), h("dd", {}, batch.graph_id),
      h("dt", {}, "Policy"), h("dd", { class: "mono" }, batch.policy),
      h("dt", {}, "Created"), h("dd", {}, when(batch.created_at)),
      h("dt", {}, "Finished"), h("dd", {}, when(batch.finished_at)),
    ),
    batch.error && h("p", { class: "error" }, batch.error.message || JSON.stringify(batch.error)),
    h("p", { class: "export" }, "Export as CSV: ", ...["codreamer", "instantly", "smartlead", "lemlist"].map((layout) =>
      h("button", { type: "button", class: "quiet", "data-layout": layout, onclick: () => download(layout) },
        layout === "codreamer" ? "all columns" : layout))));
}

/** Replies per category over the batch: the latest reply's category per prospect, or the tallies by category. */
function repliesByCategory(outcomes) {
  const counts = {};
  let replies = 0;
  for (const o of outcomes) {
    replies += o.replies;
    if (o.replies_by_category) {
      for (const [category, n] of Object.entries(o.replies_by_category)) counts[category] = (counts[category] || 0) + n;
    } else if (o.category) counts[o.category] = (counts[o.category] || 0) + 1;
  }
  const sent = outcomes.filter((o) => o.delivered > 0).length;
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  if (!entries.length) {
    return card("Replies by category", h("p", { id: "replies-by-category", class: "muted" }, replies
      ? `${replies} ${replies === 1 ? "reply" : "replies"} from ${sent} delivered, not classified yet.`
      : `No replies yet${sent ? ` (${sent} delivered)` : ""}.`));
  }
  const max = Math.max(...entries.map(([, n]) => n));
  return card("Replies by category", h("table", { id: "replies-by-category" }, h("tbody", {},
    entries.map(([category, n]) => {
      const bar = h("span", { class: "bar wide" }, h("span", {}));
      bar.firstChild.style.width = `${(100 * n) / max}%`;
      return h("tr", { "data-category": category }, h("td", {}, h("span", { class: `badge reply-${category}` }, category)),
        h("td", {}, bar), h("td", { class: "num" }, n));
    }))));
}

function draftTable(drafts, earned) {
  const categories = drafts.some((d) => earned[d.prospect.id] && earned[d.prospect.id].category !== undefined);
  const head = ["#", "Prospect", "Subject", "Fit", "Judge", "Delivered", "Opens", "Replies", ...(categories ? ["Reply"] : [])];
  const rows = drafts.map((d) => {
    const p = d.prospect;
    const o = earned[p.id];
    const who = [p.role, p.company].filter(Boolean).join(" at ");
    const subject = d.email ? h("details", {}, h("summary", {}, d.email.subject), h("div", { class: "email" }, d.email.body))
      : h("span", { class: "muted" }, d.suppressed ? `suppressed: ${d.suppressed.reason}` : (d.fit === "low" ? "skipped" : "not drafted yet"));
    return h("tr", { "data-prospect": p.id },
      h("td", { class: "num" }, d.position + 1),
      h("td", {}, h("strong", {}, p.name), who ? h("div", { class: "muted" }, who) : null),
      h("td", { class: "subject" }, subject),
      h("td", {}, d.fit ? h("span", { class: `badge fit-${d.fit}`, title: d.fit_reason || "" }, d.fit) : "–"),
      h("td", { class: "num" }, fmt(d.judge_score, 2)),
      h("td", { class: "num" }, o ? o.delivered : "–"),
      h("td", { class: "num" }, o ? o.opens : "–"),
      h("td", { class: "num" }, o ? o.replies : "–"),
      categories ? h("td", {}, o && o.category ? h("span", { class: `badge reply-${o.category}` }, o.category) : "–") : null);
  });
  return card(`Drafts (${drafts.length})`, h("table", { id: "drafts" },
    h("thead", {}, h("tr", {}, head.map((t) => h("th", {}, t)))), h("tbody", {}, rows)));
}

// ---------------------------------------------------------------- start

document.addEventListener("DOMContentLoaded", () => {
  $("#key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("#key-input").value.trim());
    $("#key-input").value = "";
    $("#key-form").hidden = true;
    route();
  });
  $("#key-forget").addEventListener("click", () => { sessionStorage.removeItem(KEY); askForKey("Key forgotten."); });
  $("#key-button").addEventListener("click", () => askForKey("Enter the API key to use in this tab."));
  window.addEventListener("hashchange", route);
  route();
});
