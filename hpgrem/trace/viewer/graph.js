// The goal graph of a state: live goals, the variables they share, the step's redex marked;
// a simple layered layout drawn as SVG, every text through text nodes.
const SVGNS = "http://www.w3.org/2000/svg";
const peColour = (p) => `hsl(${(p * 137.508) % 360}, 65%, 86%)`;
const MAX_GOALS = 24; // goals drawn in one graph; the rest are counted in a note

function el(tag, attrs, parent) {
  const n = document.createElementNS(SVGNS, tag);
  for (const k in attrs) n.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(n);
  return n;
}
function svgText(parent, x, y, text, attrs) {
  const n = el("text", Object.assign({ x, y }, attrs || {}), parent);
  n.textContent = text;
  return n;
}
// The goals to draw: the ones the event names, then goals sharing their variables, then the
// event's PE's, then any, up to MAX_GOALS. `s` is the caller's copy: the redex is put in it as
// the rewrite saw it.
function chooseGoals(s, e, side) {
  const marks = new Map();
  if (side === "before" && e.ev === "rewrite" && e.task != null) {
    const old = s.tasks.get(e.task);
    const redex = { id: e.task, goal: str(e.redex) || (old ? old.goal : ""), vars: strList(e.vars).length ? strList(e.vars) : old ? old.vars : [],
      pe: peOf(e), st: READY, on: [], depth: num(e.depth, 0) };
    s.tasks.set(e.task, redex);
    marks.set(e.task, "redex");
  } else if (side === "after" && e.ev === "rewrite") {
    for (const sp of list(e.spawn)) if (isObj(sp) && s.tasks.has(sp.task)) marks.set(sp.task, "spawned");
  } else if (e.task != null && s.tasks.has(e.task)) marks.set(e.task, "focus");
  const all = s.tasks;
  if (all.size <= MAX_GOALS) return { goals: [...all.values()], marks, hidden: 0 };
  const chosen = new Map();
  for (const id of marks.keys()) chosen.set(id, all.get(id));
  const vars = new Set();
  for (const t of chosen.values()) for (const v of t.vars) vars.add(v);
  for (const t of all.values()) {
    if (chosen.size >= MAX_GOALS) break;
    if (!chosen.has(t.id) && t.vars.some((v) => vars.has(v))) chosen.set(t.id, t);
  }
  const pe = peOf(e);
  for (const samePe of [true, false]) {
    for (const t of all.values()) {
      if (chosen.size >= MAX_GOALS) break;
      if (!chosen.has(t.id) && (t.pe === pe || !samePe)) chosen.set(t.id, t);
    }
  }
  return { goals: [...chosen.values()], marks, hidden: all.size - chosen.size };
}
function drawGraph(svg, s, a, e, side) {
  svg.replaceChildren();
  const { goals, marks, hidden } = chooseGoals(s, e, side);
  goals.sort((x, y) => x.depth - y.depth || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  const CH = 6.7, GH = 22, ROW = 62, WIDTH = 900;
  // Goals in rows by depth (when there are few depths), wrapped at WIDTH.
  const pos = new Map();
  const byDepth = new Set(goals.map((g) => g.depth)).size <= 4;
  let x = 10, y = 10, lastDepth = null, right = 0;
  for (const g of goals) {
    const label = clip(g.goal || `task ${g.id}`, 48);
    const w = Math.max(40, label.length * CH + 14);
    if ((byDepth && lastDepth !== null && g.depth !== lastDepth) || x + w > WIDTH) { x = 10; y += ROW; }
    lastDepth = g.depth;
    pos.set(g.id, { x, y, w, label });
    x += w + 14; right = Math.max(right, x);
  }
  // Variables in a row below, each near the goals that mention it.
  const varUsers = new Map();
  for (const g of goals) for (const v of g.vars) {
    if (!varUsers.has(v)) varUsers.set(v, []);
    varUsers.get(v).push(g);
  }
  const varY = (goals.length ? y + ROW + 10 : 20);
  const vars = [...varUsers.keys()].map((v) => {
    const us = varUsers.get(v);
    const cx = us.reduce((acc, g) => acc + pos.get(g.id).x + pos.get(g.id).w / 2, 0) / us.length;
    const val = boundValue(v, a);
    const label = clip(v, 14) + (val === undefined ? "" : " = " + clip(val, 18));
    return { v, cx, label, w: Math.max(26, label.length * CH + 16), bound: val !== undefined };
  }).sort((p, q) => p.cx - q.cx);
  // Once a row is full the rest are packed left to right, row after row.
  let vx = 10, vy = varY, packed = false;
  for (const n of vars) {
    n.x = packed ? vx : Math.max(vx, n.cx - n.w / 2);
    if (n.x + n.w > WIDTH + 200) { vy += 40; n.x = 10; packed = true; }
    n.y = vy; vx = n.x + n.w + 10; right = Math.max(right, vx);
  }
  const varPos = new Map(vars.map((n) => [n.v, n]));
  const edges = el("g", {}, svg), nodes = el("g", {}, svg);
  for (const g of goals) {
    const p = pos.get(g.id);
    for (const v of g.vars) {
      const n = varPos.get(v);
      const waits = g.st === SUSPENDED && g.on.includes(v);
      el("line", { x1: p.x + p.w / 2, y1: p.y + GH, x2: n.x + n.w / 2, y2: n.y,
        stroke: waits ? "#f18f01" : "#9aa5b8", "stroke-width": waits ? 2 : 1, "stroke-dasharray": waits ? "4 3" : "" }, edges);
    }
  }
  for (const g of goals) {
    const p = pos.get(g.id), mark = marks.get(g.id);
    const grp = el("g", { class: "goal" + (mark ? " " + mark : "") }, nodes);
    const stroke = mark === "redex" ? "#d7263d" : mark === "spawned" ? "#1b998b" : g.st === SUSPENDED ? "#f18f01" : mark === "focus" ? "#24324a" : "#7a8496";
    const dash = g.st === SUSPENDED ? "2 2" : g.st === TRANSIT ? "8 2 2 2" : mark === "spawned" ? "5 3" : "";
    el("rect", { x: p.x, y: p.y, width: p.w, height: GH, rx: 5, fill: peColour(g.pe), stroke,
      "stroke-width": mark ? 3 : 1.3, "stroke-dasharray": dash }, grp);
    svgText(grp, p.x + 7, p.y + 15, p.label);
    const state = ["ready", "suspended on " + g.on.join(", "), "in transit"][g.st];
    el("title", {}, grp).textContent = `${g.goal}\ntask ${g.id} on PE ${g.pe}, ${state}`;
  }
  for (const n of vars) {
    const grp = el("g", { class: "var" }, nodes);
    el("rect", { x: n.x, y: n.y, width: n.w, height: 20, rx: 10, fill: n.bound ? "#dfe9ff" : "#ffffff", stroke: "#5a6478" }, grp);
    svgText(grp, n.x + 8, n.y + 14, n.label);
    const val = boundValue(n.v, a);
    el("title", {}, grp).textContent = n.v + (val === undefined ? " (unbound)" : " = " + val);
  }
  if (!goals.length) svgText(svg, 10, 20, "no live goals", { fill: "#5a6478" });
  return { hidden, width: right, height: Math.max(vy + 30, 40) };
}
// Both graphs of a step at one scale, never magnified past a readable size, each as tall as
// its drawing needs at that scale (within bounds).
function fitGraphs(svgs, sizes) {
  const w = Math.max(700, ...sizes.map((s) => s.width)), h = Math.max(60, ...sizes.map((s) => s.height));
  const scale = (svgs[0].clientWidth || 700) / w;
  for (const svg of svgs) {
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
    svg.style.height = Math.round(Math.min(340, Math.max(70, h * scale + 4))) + "px";
  }
}
