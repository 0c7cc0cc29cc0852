// fabricd live dashboard: reads /api/* and follows /events (server-sent events).
// Every text from the daemon is set with textContent (names come from the fabric).
"use strict";

const state = { status: null, fabric: null, problems: null, loads: null, pattern: "a2a" };
const COLORS = { up: "#2e9e5b", down: "#d6403a", excluded: "#a05ad8", errors: "#e6a23c", switchdown: "#6e1a1a", unconnected: "#2c3540", endport: "#31404f" };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("data-")) e.setAttribute(k, v); else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

function swLabel(name, guid) { return name ? name + " (" + guid + ")" : guid; }

// ---- status ----
function renderStatus(s) {
  document.getElementById("generation").textContent = s.generation;
  document.getElementById("phase").textContent = s.phase === "idle" ? "idle" : s.phase + " → " + s.phase_generation;
  const ready = document.getElementById("ready");
  ready.textContent = s.ready ? "ready" : "not ready";
  ready.title = s.not_ready_reason || "";
  ready.className = "badge " + (s.ready ? "ok" : "bad");
  const cards = [
    ["switches up", s.switches_up + " / " + s.switches, s.switches_up < s.switches],
    ["links up", s.links_up + " / " + s.links, s.links_up < s.links],
    ["end ports live", s.end_ports_up + " / " + s.end_ports, s.end_ports_up < s.end_ports],
    ["virtual faults", s.virtual_faults, s.virtual_faults > 0],
    ["pending changes", s.pending_faults, s.pending_faults > 0],
    ["routing", s.routing_valid ? "valid" : s.unreachable_pairs + " pairs unreachable", !s.routing_valid],
    ["engine / driver", s.engine + " / " + s.driver, false],
    ["levels", s.levels, false],
    ["last reroute", s.last_reroute ? s.last_reroute.committed_ms.toFixed(1) + " ms" : "–", false],
    ["subscribers", s.subscribers, false],
  ];
  if (s.last_error) cards.push(["last error", s.last_error, true]);
  document.getElementById("summary").replaceChildren(...cards.map(([k, v, bad]) =>
    el("div", { class: "card" + (bad ? " bad" : "") }, el("div", { class: "v" }, v), el("div", { class: "k" }, k))));
}

// ---- grids (health and heatmap): one canvas per level, switches × ports ----
function cellSize(maxPorts, rows) {
  const width = Math.max(300, document.querySelector("main").clientWidth - 260);
  // A level takes at most ~480 px of height; cells stay about square.
  const w = Math.max(3, Math.min(16, Math.floor(width / Math.max(1, maxPorts))));
  const h = Math.max(3, Math.min(16, Math.floor(480 / Math.max(1, rows))));
  return [Math.min(w, Math.max(h, 6)), Math.min(w, h)];
}

function drawGrid(container, fabric, colorOf, tipOf) {
  container.replaceChildren();
  for (const level of fabric.levels) {
    const sws = level.switches;
    if (!sws.length) continue;
    const maxPorts = Math.max(...sws.map(s => s.ports.length));
    const [cw, ch] = cellSize(maxPorts, sws.length);
    const canvas = el("canvas", { width: maxPorts * cw, height: sws.length * ch });
    canvas.dataset.level = level.level === null ? "unranked" : level.level;
    const ctx = canvas.getContext("2d");
    sws.forEach((s, r) => s.ports.forEach((p, c) => {
      ctx.fillStyle = colorOf(s, p);
      ctx.fillRect(c * cw, r * ch, Math.max(1, cw - 1), Math.max(1, ch - 1));
    }));
    canvas.addEventListener("mousemove", ev => {
      const r = Math.floor(ev.offsetY / ch), c = Math.floor(ev.offsetX / cw);
      const s = sws[r], p = s && s.ports[c];
      showTip(ev, p ? tipOf(s, p) : null);
    });
    canvas.addEventListener("mouseleave", () => showTip(null, null));
    const names = el("div", { class: "names" });
    if (ch >= 9) for (const s of sws) {
      const n = el("div", {}, s.name || s.guid);
      n.style.height = n.style.lineHeight = ch + "px";
      names.append(n);
    }
    const title = level.level === null ? "never ranked" : "level " + level.level + (level.level === 0 ? " (leaves)" : "");
    container.append(el("h3", {}, title + " — " + sws.length + " switch" + (sws.length === 1 ? "" : "es")), el("div", { class: "level" }, names, canvas));
  }
}

function showTip(ev, text) {
  const tip = document.getElementById("tip");
  if (!text) { tip.hidden = true; return; }
  tip.textContent = text;
  tip.hidden = false;
  tip.style.left = (ev.clientX + 14) + "px";
  tip.style.top = (ev.clientY + 14) + "px";
}

function portTip(s, p) {
  let t = swLabel(s.name, s.guid) + " port " + p.port + "\n" + p.state + (p.excluded ? ", excluded from routing" : "");
  if (!s.up) t += "\nswitch down";
  if (p.remote !== "none") t += "\n→ " + swLabel(p.remote_name, p.remote_guid) + " port " + p.remote_port;
  if (p.error_rate !== undefined) t += "\nerrors: " + p.error_rate.toFixed(2) + "/s";
  return t;
}

function healthColor(s, p) {
  if (!s.up) return COLORS.switchdown;
  if (p.excluded) return COLORS.excluded;
  if (p.state === "down") return COLORS.down;
  if (p.state === "unconnected") return COLORS.unconnected;
  if (p.error_rate > 0) return COLORS.errors;
  return COLORS.up;
}

function heat(x) {
  // 0 → dark blue, 0.33 → blue, 0.66 → yellow, 1 → red.
  const stops = [[27, 42, 58], [47, 127, 184], [242, 210, 75], [224, 64, 42]];
  const t = Math.max(0, Math.min(1, x)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(t)), f = t - i;
  const c = stops[i].map((v, k) => Math.round(v + (stops[i + 1][k] - v) * f));
  return "rgb(" + c.join(",") + ")";
}

function renderHealth() {
  if (state.fabric) drawGrid(document.getElementById("health"), state.fabric, healthColor, portTip);
}

function renderHeatmap() {
  const box = document.getElementById("heatmap"), note = document.getElementById("loads-note");
  const L = state.loads, F = state.fabric;
  if (!F) return;
  if (!L || !L.ports) { note.textContent = "(computing…)"; box.replaceChildren(el("p", { class: "empty" }, "The loads of the installed routing are being computed.")); return; }
  const shift = state.pattern === "shift" && L.shifts;
  const max = shift ? L.max_worst_shift : L.max_all_to_all;
  const byPort = new Map(L.ports.map(([g, p, a, s]) => [g + ":" + p, shift ? s : a]));
  note.textContent = "— generation " + L.generation + ", " + L.end_ports + " end ports, max " + max + " paths" +
    (L.generation < F.generation ? " (generation " + F.generation + " being computed)" : "") +
    (state.pattern === "shift" && !L.shifts ? " (shifts are off: [metrics] shifts)" : "");
  drawGrid(box, F, (s, p) => {
    const v = byPort.get(s.guid + ":" + p.port);
    if (v === undefined) return p.remote === "end_port" && p.state === "up" ? COLORS.endport : COLORS.unconnected;
    return heat(max > 0 ? v / max : 0);
  }, (s, p) => {
    const v = byPort.get(s.guid + ":" + p.port);
    return swLabel(s.name, s.guid) + " port " + p.port + "\n" + (v === undefined ? "not a live switch-to-switch port" : v + " paths");
  });
}

function renderProblems(pv) {
  const rows = pv.problems.map(p => el("tr", { "data-port": p.switch_guid + ":" + p.port, "data-kind": p.kind },
    el("td", { class: "kind-" + p.kind }, p.kind),
    el("td", {}, swLabel(p.switch_name, p.switch_guid)),
    el("td", {}, p.port || "–"),
    el("td", {}, p.remote_guid ? swLabel(p.remote_name, p.remote_guid) + " port " + p.remote_port : ""),
    el("td", {}, p.reason || "")));
  document.getElementById("problems").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colSpan: 5 }, "none"))]));
}

function renderJobs(j) {
  const rows = j.jobs.map(job => el("tr", {}, el("td", {}, job.id), el("td", {}, job.end_ports.map(p => p.name || p.guid).join(", "))));
  document.getElementById("jobs").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colSpan: 2 }, j.job_aware ? "no job mapped" : "no job mapped (job-aware routing off)"))]));
}

function renderTimeline(t) {
  const ev = t.events.slice(-100).reverse();
  document.getElementById("timeline").replaceChildren(...ev.map(e => el("tr", { "data-kind": e.kind },
    el("td", {}, new Date(e.at_unix_ms).toLocaleTimeString()), el("td", {}, e.generation), el("td", {}, e.text))));
  const commits = t.events.filter(e => e.kind === "committed").slice(-60);
  const max = Math.max(1, ...commits.map(e => e.timings.committed_ms));
  document.getElementById("gens").replaceChildren(...commits.map(e => {
    const d = el("div", { title: e.text });
    d.style.height = Math.max(2, 60 * e.timings.committed_ms / max) + "px";
    return d;
  }));
}

// ---- refresh, coalesced ----
let inFlight = false, again = false, timer = null;
function scheduleRefresh(delay) {
  if (timer) return;
  timer = setTimeout(() => { timer = null; refresh(); }, delay === undefined ? 100 : delay);
}

async function refresh() {
  if (inFlight) { again = true; return; }
  inFlight = true;
  try {
    const [status, fabric, problems, jobs, timeline] = await Promise.all(
      ["/api/status", "/api/fabric", "/api/excluded", "/api/jobs", "/api/timeline"].map(getJson));
    state.status = status; state.fabric = fabric;
    renderStatus(status); renderHealth(); renderProblems(problems); renderJobs(jobs); renderTimeline(timeline);
    if (!state.loads || state.loads.generation !== fabric.generation) await refreshLoads(); else renderHeatmap();
  } catch (e) {
    document.getElementById("live").textContent = "error: " + e.message;
  } finally {
    inFlight = false;
    if (again) { again = false; scheduleRefresh(); }
  }
}

async function refreshLoads() {
  const l = await getJson("/api/loads");
  if (l.ports) state.loads = l;
  renderHeatmap();
}

function connect() {
  const live = document.getElementById("live");
  const es = new EventSource("/events");
  es.onopen = () => { live.dataset.state = "live"; live.textContent = "live"; scheduleRefresh(0); };
  es.onerror = () => { live.dataset.state = "down"; live.textContent = "reconnecting"; };
  es.addEventListener("notice", () => scheduleRefresh());
  es.addEventListener("lagged", () => scheduleRefresh());
  es.addEventListener("loads", () => refreshLoads().catch(() => {}));
}

document.addEventListener("DOMContentLoaded", () => {
  for (const r of document.querySelectorAll("input[name=pattern]")) r.addEventListener("change", () => { state.pattern = r.value; renderHeatmap(); });
  let resize = null;
  window.addEventListener("resize", () => { clearTimeout(resize); resize = setTimeout(() => { renderHealth(); renderHeatmap(); }, 200); });
  refresh();
  connect();
});
