"use strict";
// The hpgrem trace viewer (docs/teaching.md). A step is one event of the stream in file order
// (the final "end" line is not a step). One pass at load computes what every step needs cheaply
// (task counts, message pairs, bindings, per-PE timelines) and keeps a copy of the machine state
// every K steps; the state at any step is replayed from the nearest copy. Trace text is shown only
// through textContent and SVG text nodes, never parsed as markup.
(function () {
  const SVGNS = "http://www.w3.org/2000/svg";
  const MAX_GOALS = 24; // goals drawn in one graph; the rest are counted in a note
  const MAX_ARROWS = 1500; // message arrows drawn in the timeline's window
  const MAX_LABELS = 24; // arrows labelled (kind, bytes, hops) when no more are in the window
  const READY = 0, SUSPENDED = 1, TRANSIT = 2;
  const RUNNING = 1, IDLE = 2, WAITING = 3; // timeline lane codes
  const TASK_WORK = new Set(["rewrite", "suspend", "resume", "fail"]);
  const LANE_COLOURS = ["#ffffff", "#3d9970", "#d8dde6", "#f6c26b"];

  const isObj = (x) => x !== null && typeof x === "object" && !Array.isArray(x);
  const num = (x, d) => (typeof x === "number" && Number.isFinite(x) ? x : d);
  const int = (x, d) => (Number.isInteger(x) ? x : d);
  const str = (x) => (typeof x === "string" ? x : typeof x === "number" ? String(x) : "");
  const strList = (x) => (Array.isArray(x) ? x.filter((v) => typeof v === "string") : []);
  const list = (x) => (Array.isArray(x) ? x : []);
  const $ = (id) => document.getElementById(id);
  const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "\u2026" : s);

  const data = JSON.parse($("trace-data").textContent);
  const header = isObj(data.header) ? data.header : {};
  const events = list(data.events).filter(isObj);
  const endLine = events.length && events[events.length - 1].ev === "end" ? events.pop() : null;
  const N = events.length;

  let P = Math.max(1, int(header.pes, 1));
  for (const e of events) {
    for (const p of [e.pe, e.to, e.from]) if (Number.isInteger(p) && p >= 0 && p < 65536) P = Math.max(P, p + 1);
  }
  const peOf = (e) => (Number.isInteger(e.pe) && e.pe >= 0 && e.pe < P ? e.pe : 0);
  const peColour = (p) => `hsl(${(p * 137.508) % 360}, 65%, 86%)`;

  // ---- machine state: live tasks and per-PE counters --------------------------------------
  function newState() {
    return { tasks: new Map(), ready: new Int32Array(P), susp: new Int32Array(P), red: new Int32Array(P),
      idle: new Uint8Array(P), totalReady: 0, totalSusp: 0, a: 0 };
  }
  function cloneState(s) {
    return { tasks: new Map(s.tasks), ready: s.ready.slice(), susp: s.susp.slice(), red: s.red.slice(),
      idle: s.idle.slice(), totalReady: s.totalReady, totalSusp: s.totalSusp, a: s.a };
  }
  function count(s, t, d) {
    if (t.st === READY) { s.ready[t.pe] += d; s.totalReady += d; }
    else if (t.st === SUSPENDED) { s.susp[t.pe] += d; s.totalSusp += d; }
  }
  // Task records are never changed in place, so a state copy shares them safely.
  function setTask(s, id, next) {
    const old = s.tasks.get(id);
    if (old) count(s, old, -1);
    if (next) { s.tasks.set(id, next); count(s, next, 1); } else s.tasks.delete(id);
  }
  const msgTask = new Map(); // message id -> the task it carries
  const lastUse = new Map(); // task id -> the index of the last event naming it as its task
  function apply(s, e) {
    const pe = peOf(e);
    const id = e.task;
    const old = id === undefined ? undefined : s.tasks.get(id);
    switch (e.ev) {
      case "rewrite": {
        const depth = num(e.depth, old ? old.depth : 0);
        // A task named again later goes on (an ML evaluation runs many reductions as one task);
        // otherwise the rewrite consumed it.
        if (id != null && lastUse.get(id) > s.a) {
          setTask(s, id, { id, goal: `task ${str(id)}, after ${str(e.rule)}`, vars: [], pe, st: READY, on: [], depth });
        } else setTask(s, id, null);
        s.red[pe] += 1;
        for (const sp of list(e.spawn)) {
          if (isObj(sp) && sp.task !== undefined) {
            setTask(s, sp.task, { id: sp.task, goal: str(sp.goal), vars: strList(sp.vars), pe, st: READY, on: [], depth: depth + 1 });
          }
        }
        break;
      }
      case "suspend":
        setTask(s, id, { id, goal: str(e.goal) || (old ? old.goal : ""), vars: old ? old.vars : strList(e.vars).concat(strList(e.on)),
          pe, st: SUSPENDED, on: strList(e.on), depth: old ? old.depth : 0 });
        break;
      case "resume":
        if (old) setTask(s, id, { ...old, pe, st: READY, on: [] });
        break;
      case "fail":
        setTask(s, id, null);
        break;
      case "send": {
        const moved = e.task == null ? undefined : s.tasks.get(e.task);
        if (moved && Number.isInteger(e.to) && e.to >= 0 && e.to < P) setTask(s, e.task, { ...moved, pe: e.to, st: TRANSIT });
        break;
      }
      case "receive": {
        const tid = msgTask.get(e.msg);
        const moved = tid === undefined ? undefined : s.tasks.get(tid);
        if (moved) setTask(s, tid, { ...moved, pe, st: READY });
        break;
      }
      case "steal": // reported by the victim ("to": the thief) or, in older streams, the thief
        if (old) setTask(s, id, { ...old, pe: Number.isInteger(e.to) && e.to >= 0 && e.to < P ? e.to : pe, st: READY });
        break;
    }
    // A PE runs from its next reduction after an idle event; handling messages while it waits
    // (a steal request, a value) leaves it idle.
    if (e.ev === "idle") s.idle[pe] = 1;
    else if (TASK_WORK.has(e.ev)) s.idle[pe] = 0;
    s.a += 1;
  }
  const laneCode = (s, p) => (s.idle[p] ? (s.susp[p] > 0 ? WAITING : IDLE) : RUNNING);

  // ---- the one pass at load ---------------------------------------------------------------
  const K = Math.max(256, Math.ceil(N / 64));
  const checkpoints = [];
  const totalReady = new Int32Array(N + 1), totalSusp = new Int32Array(N + 1);
  const sendOf = new Map(), recvOf = new Map(); // message id -> event index
  const bindings = new Map(); // variable -> [[event index, value], ...]
  const peEvents = Array.from({ length: P }, () => []);
  const laneT = Array.from({ length: P }, () => []), laneC = Array.from({ length: P }, () => []);
  const rewrites = [];
  let tMin = Infinity, tMax = -Infinity;
  for (let i = 0; i < N; i++) {
    const e = events[i];
    if (e.task != null) lastUse.set(e.task, i);
    if (e.ev === "send" && e.msg != null) { sendOf.set(e.msg, i); if (e.task != null) msgTask.set(e.msg, e.task); }
    else if (e.ev === "receive" && e.msg != null) recvOf.set(e.msg, i);
    else if (e.ev === "rewrite") {
      rewrites.push(i);
      if (isObj(e.bind)) for (const v of Object.keys(e.bind)) {
        if (!bindings.has(v)) bindings.set(v, []);
        bindings.get(v).push([i, str(e.bind[v])]);
      }
    }
  }
  {
    const s = newState();
    for (let i = 0; i < N; i++) {
      if (i % K === 0) checkpoints.push(cloneState(s));
      const e = events[i];
      const pe = peOf(e);
      const t = num(e.t, i);
      tMin = Math.min(tMin, t); tMax = Math.max(tMax, t);
      peEvents[pe].push(i);
      apply(s, e);
      totalReady[i + 1] = s.totalReady; totalSusp[i + 1] = s.totalSusp;
      // The lane of this PE, and of the PE a moved or woken task belongs to, may change colour.
      const task = e.task != null ? s.tasks.get(e.task) : undefined;
      for (const p of task && task.pe !== pe ? [pe, task.pe] : [pe]) {
        const c = laneCode(s, p), cs = laneC[p];
        if (cs.length === 0 || cs[cs.length - 1] !== c) { laneT[p].push(t); cs.push(c); }
      }
    }
  }
  if (!Number.isFinite(tMin)) { tMin = 0; tMax = 1; }
  if (tMax <= tMin) tMax = tMin + 1;
  const peEventT = peEvents.map((ix) => Float64Array.from(ix, (i) => num(events[i].t, i)));
  const lanes = laneT.map((ts, p) => ({ t: Float64Array.from(ts), c: Uint8Array.from(laneC[p]),
    end: peEventT[p].length ? peEventT[p][peEventT[p].length - 1] : tMin }));
  const messages = [];
  for (const [msg, si] of sendOf) {
    const ri = recvOf.get(msg);
    if (ri === undefined) continue;
    const se = events[si], re = events[ri];
    messages.push({ si, ri, t0: num(se.t, si), t1: num(re.t, ri), from: peOf(se), to: peOf(re),
      label: `${clip(str(se.kind) || "msg", 12)} ${num(se.bytes, 0)}B ${num(se.hops, 0)}h` });
  }

  // ---- state at any step ------------------------------------------------------------------
  let cursor = null;
  function stateAt(a) { // the state after `a` events, in a copy the caller may keep
    if (!cursor || cursor.a > a || a - cursor.a > K) cursor = cloneState(checkpoints[Math.min(Math.floor(a / K), checkpoints.length - 1)] || newState());
    while (cursor.a < a) apply(cursor, events[cursor.a]);
    return cloneState(cursor);
  }
  function boundValue(v, a) { // the value `v` holds after `a` events, or undefined
    const bs = bindings.get(v);
    if (!bs) return undefined;
    let found;
    for (const [i, val] of bs) { if (i < a) found = val; else break; }
    return found;
  }

  // ---- the goal graph ---------------------------------------------------------------------
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
  // The goals to draw: the ones the event names first, then goals sharing their variables.
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
    for (const t of all.values()) {
      if (chosen.size >= MAX_GOALS) break;
      if (!chosen.has(t.id) && t.pe === pe) chosen.set(t.id, t);
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
    // Variables in one row below, each near the goals that mention it.
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
    let vx = 10, vy = varY;
    for (const n of vars) {
      n.x = Math.max(vx, n.cx - n.w / 2);
      if (n.x + n.w > WIDTH + 200) { vy += 40; n.x = 10; }
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

  // ---- the step panel ---------------------------------------------------------------------
  function summary(i) {
    const e = events[i];
    const head = `${String(i + 1).padStart(6)}  PE ${peOf(e)}  t=${num(e.t, 0)}  ${str(e.ev)}`;
    switch (e.ev) {
      case "rewrite": return `${head} ${str(e.rule)}${e.clause !== undefined ? "#" + str(e.clause) : ""}: ${str(e.redex)}`;
      case "suspend": return `${head} task ${str(e.task)} on ${strList(e.on).join(", ")}: ${str(e.goal)}`;
      case "resume": return `${head} task ${str(e.task)} by ${str(e.by)}`;
      case "fail": return `${head} task ${str(e.task)}: ${str(e.goal)}`;
      case "send": return `${head} ${str(e.kind)} #${str(e.msg)} to PE ${str(e.to)}, ${num(e.bytes, 0)} bytes, ${num(e.hops, 0)} hops`;
      case "receive": return `${head} ${str(e.kind)} #${str(e.msg)} from PE ${str(e.from)}, ${num(e.bytes, 0)} bytes`;
      case "steal": return `${head} task ${str(e.task)} from PE ${str(e.from)}${e.to !== undefined ? " to PE " + str(e.to) : ""}`;
      case "terminate": return `${head} ${str(e.status)}`;
      default: return head;
    }
  }
  function fields(e, i) {
    const rows = [["PE", peOf(e)], ["clock t", num(e.t, 0)], ["sequence on PE", num(e.seq, 0)]];
    if (e.task != null) rows.push(["task", str(e.task)]);
    switch (e.ev) {
      case "rewrite":
        rows.push(["rule", str(e.rule) + (e.clause !== undefined ? `, clause ${str(e.clause)}` : "")]);
        rows.push(["redex", str(e.redex)]);
        if (isObj(e.bind)) for (const v of Object.keys(e.bind)) rows.push(["binds " + v, str(e.bind[v])]);
        for (const sp of list(e.spawn)) if (isObj(sp)) rows.push(["creates task " + str(sp.task), str(sp.goal)]);
        rows.push(["goal depth", num(e.depth, 0)]);
        if (e.inline) rows.push(["inline", "ran inside another step"]);
        break;
      case "suspend": rows.push(["goal", str(e.goal)], ["waits for", strList(e.on).join(", ")]); break;
      case "resume": {
        const v = str(e.by), val = boundValue(v, i + 1);
        rows.push(["woken by", v + (val === undefined ? "" : " = " + val)]);
        break;
      }
      case "fail": rows.push(["goal", str(e.goal)]); break;
      case "send": case "receive": {
        rows.push(["message", `#${str(e.msg)} ${str(e.kind)}`], ["bytes", num(e.bytes, 0)]);
        if (e.ev === "send") {
          rows.push(["to PE", str(e.to)], ["hops", num(e.hops, 0)]);
          const r = recvOf.get(e.msg);
          rows.push(["received", r === undefined ? "never" : `step ${r + 1}, t=${num(events[r].t, 0)}`]);
        } else {
          rows.push(["from PE", str(e.from)]);
          const sIdx = sendOf.get(e.msg);
          if (sIdx !== undefined) rows.push(["sent", `step ${sIdx + 1}, t=${num(events[sIdx].t, 0)}`]);
        }
        break;
      }
      case "steal":
        rows.push(["stolen from PE", str(e.from)]);
        if (e.to !== undefined) rows.push(["by PE", str(e.to)]);
        break;
      case "idle": rows.push(["state", "no ready task on this PE"]); break;
      case "terminate":
        rows.push(["status", str(e.status)]);
        if (list(e.suspended).length) rows.push(["left suspended", list(e.suspended).map(str).join(", ")]);
        if (list(e.in_flight).length) rows.push(["messages in flight", list(e.in_flight).map(str).join(", ")]);
        break;
    }
    return rows;
  }
  function showSource(e) {
    const pre = $("source");
    const span = list(e.span);
    const lines = isObj(header.sources) ? list(header.sources[str(span[0])]) : [];
    const line = int(span[1], 0);
    if (!lines.length || line < 1 || line > lines.length) { pre.hidden = true; return; }
    pre.hidden = false;
    pre.replaceChildren();
    const from = Math.max(1, line - 2), to = Math.min(lines.length, line + 2);
    const width = String(to).length;
    const head = document.createElement("div");
    head.textContent = `${str(span[0])}:${line}${span[2] !== undefined ? ":" + str(span[2]) : ""}`;
    pre.appendChild(head);
    for (let l = from; l <= to; l++) {
      const row = document.createElement("span");
      row.textContent = `${String(l).padStart(width)} | ${str(lines[l - 1])}`;
      if (l === line) row.className = "hit";
      pre.appendChild(row);
      pre.appendChild(document.createTextNode("\n"));
    }
  }

  // ---- counts over the run and the timeline ---------------------------------------------------
  function fitCanvas(c, cssHeight) {
    const r = window.devicePixelRatio || 1;
    const w = Math.max(100, c.clientWidth || c.parentElement.clientWidth || 600);
    c.style.height = cssHeight + "px";
    if (c.width !== Math.round(w * r) || c.height !== Math.round(cssHeight * r)) {
      c.width = Math.round(w * r); c.height = Math.round(cssHeight * r);
    }
    const g = c.getContext("2d");
    g.setTransform(r, 0, 0, r, 0, 0);
    return { g, w, h: cssHeight, r };
  }
  // A canvas whose unchanging drawing is kept in an offscreen copy, painted again only when `key`
  // or the size changes; returns the visible context with that copy drawn, for what each step adds.
  const backgrounds = new Map();
  function withBackground(c, cssHeight, key, paint) {
    const { g, w, h, r } = fitCanvas(c, cssHeight);
    let bg = backgrounds.get(c);
    if (!bg || bg.key !== key || bg.canvas.width !== c.width || bg.canvas.height !== c.height) {
      const canvas = document.createElement("canvas");
      canvas.width = c.width; canvas.height = c.height;
      const b = canvas.getContext("2d");
      b.setTransform(r, 0, 0, r, 0, 0);
      paint(b, w, h);
      bg = { key, canvas };
      backgrounds.set(c, bg);
    }
    g.setTransform(1, 0, 0, 1, 0, 0);
    g.clearRect(0, 0, c.width, c.height);
    g.drawImage(bg.canvas, 0, 0);
    g.setTransform(r, 0, 0, r, 0, 0);
    return { g, w, h };
  }
  function drawCounts(a) {
    const { g, w, h } = withBackground($("counts"), 80, "counts", (g, w, h) => {
      let most = 1;
      for (let i = 0; i <= N; i++) most = Math.max(most, totalReady[i], totalSusp[i]);
      for (const [arr, colour] of [[totalReady, "#3d9970"], [totalSusp, "#f18f01"]]) {
        g.strokeStyle = colour; g.lineWidth = 1.5; g.beginPath();
        for (let px = 0; px < w; px++) {
          const lo = Math.floor((px / w) * N), hi = Math.max(lo + 1, Math.floor(((px + 1) / w) * N));
          let m = 0;
          for (let i = lo; i <= Math.min(hi, N); i++) m = Math.max(m, arr[i]);
          const y = h - 12 - (m / most) * (h - 20);
          if (px === 0) g.moveTo(px, y); else g.lineTo(px, y);
        }
        g.stroke();
      }
      g.fillStyle = "#5a6478"; g.font = "11px system-ui";
      g.fillText(`ready (green), suspended (orange); most ${most}`, 4, h - 1);
    });
    g.font = "11px system-ui";
    const x = N ? (a / N) * w : 0;
    g.strokeStyle = "#d7263d"; g.lineWidth = 1; g.beginPath(); g.moveTo(x, 0); g.lineTo(x, h - 12); g.stroke();
    g.fillStyle = "#1d2330";
    g.fillText(`ready ${totalReady[a]}, suspended ${totalSusp[a]}`, Math.min(x + 4, w - 160), 11);
  }

  const view = { t0: tMin, t1: tMax };
  const LANE_LABEL = 44, AXIS = 18;
  const laneHeight = () => Math.max(4, Math.min(26, Math.floor(260 / P)));
  const firstAtOrBefore = (arr, t) => { // index of the last element <= t (or 0)
    let lo = 0, hi = arr.length - 1, ans = 0;
    while (lo <= hi) { const mid = (lo + hi) >> 1; if (arr[mid] <= t) { ans = mid; lo = mid + 1; } else hi = mid - 1; }
    return ans;
  };
  function drawTimeline(i) {
    const c = $("timeline");
    const lh = laneHeight();
    const span = view.t1 - view.t0;
    const scale = (w) => (t) => LANE_LABEL + ((t - view.t0) / span) * (w - LANE_LABEL - 4);
    const { g, w } = withBackground(c, P * lh + AXIS + 4, `${view.t0} ${view.t1}`, (g, w) => {
      const px = scale(w);
      g.font = "10px system-ui"; g.textBaseline = "middle";
      for (let p = 0; p < P; p++) {
        const y = p * lh, lane = lanes[p];
        if (lh >= 8) { g.fillStyle = "#5a6478"; g.fillText("PE " + p, 2, y + lh / 2); }
        if (!lane.t.length) continue;
        let lastX = -1;
        for (let k = firstAtOrBefore(lane.t, view.t0); k < lane.t.length && lane.t[k] <= view.t1; k++) {
          const x0 = Math.max(LANE_LABEL, px(lane.t[k]));
          const x1 = Math.min(w - 4, px(k + 1 < lane.t.length ? lane.t[k + 1] : lane.end));
          if (x1 < lastX) continue;
          g.fillStyle = LANE_COLOURS[lane.c[k]];
          g.fillRect(x0, y + 1, Math.max(1, x1 - x0), lh - 2);
          lastX = Math.max(x0 + 1, x1);
        }
      }
      const shown = messages.filter((m) => m.t1 >= view.t0 && m.t0 <= view.t1);
      g.strokeStyle = "rgba(43, 89, 195, 0.7)"; g.fillStyle = "#2b59c3"; g.lineWidth = 1;
      if (shown.length > MAX_ARROWS) {
        g.textBaseline = "top"; g.font = "11px system-ui";
        g.fillText(`${shown.length} messages in view: zoom in to draw them`, LANE_LABEL + 4, 1);
      }
      for (const m of shown.length > MAX_ARROWS ? [] : shown) {
        const x0 = px(m.t0), y0 = m.from * lh + lh / 2, x1 = px(m.t1), y1 = m.to * lh + lh / 2;
        g.beginPath(); g.moveTo(x0, y0); g.lineTo(x1, y1); g.stroke();
        const ang = Math.atan2(y1 - y0, x1 - x0);
        g.beginPath(); g.moveTo(x1, y1);
        g.lineTo(x1 - 6 * Math.cos(ang - 0.4), y1 - 6 * Math.sin(ang - 0.4));
        g.lineTo(x1 - 6 * Math.cos(ang + 0.4), y1 - 6 * Math.sin(ang + 0.4)); g.fill();
        if (shown.length <= MAX_LABELS) g.fillText(m.label, (x0 + x1) / 2 + 3, (y0 + y1) / 2);
      }
      g.fillStyle = "#5a6478"; g.textBaseline = "alphabetic";
      const stepT = Math.pow(10, Math.floor(Math.log10(span / 6)));
      const tick = [1, 2, 5, 10].map((m) => m * stepT).find((s) => span / s <= 8) || stepT * 10;
      for (let t = Math.ceil(view.t0 / tick) * tick; t <= view.t1; t += tick) {
        const x = px(t);
        g.fillRect(x, P * lh, 1, 4);
        g.fillText(String(+t.toPrecision(6)), x + 2, P * lh + 14);
      }
    });
    if (i < 0) return;
    const px = scale(w);
    const e = events[i], x = px(num(e.t, 0)), p = peOf(e);
    g.strokeStyle = "#d7263d"; g.lineWidth = 1;
    g.beginPath(); g.moveTo(x, 0); g.lineTo(x, P * lh); g.stroke();
    g.fillStyle = "#d7263d"; g.fillRect(x - 3, p * lh + lh / 2 - 3, 6, 6);
    if (e.ev === "send" || e.ev === "receive") {
      const m = messages.find((q) => q.si === i || q.ri === i);
      if (m) {
        g.lineWidth = 3; g.beginPath();
        g.moveTo(px(m.t0), m.from * lh + lh / 2); g.lineTo(px(m.t1), m.to * lh + lh / 2); g.stroke();
        g.font = "bold 11px system-ui"; g.fillText(m.label, (px(m.t0) + px(m.t1)) / 2 + 4, (m.from + m.to) * lh / 2 + lh / 2 - 4);
      }
    }
  }
  function followCursor(i) {
    if (i < 0) return;
    const t = num(events[i].t, 0), span = view.t1 - view.t0;
    if (t < view.t0 || t > view.t1) {
      view.t0 = Math.max(tMin, t - span / 2); view.t1 = view.t0 + span;
      if (view.t1 > tMax) { view.t1 = tMax; view.t0 = Math.max(tMin, tMax - span); }
    }
  }
  function zoom(factor, centre) {
    const span = Math.min(tMax - tMin, Math.max((view.t1 - view.t0) * factor, 1e-9));
    const c = centre === undefined ? (i0 >= 0 ? num(events[i0].t, 0) : (view.t0 + view.t1) / 2) : centre;
    view.t0 = Math.max(tMin, c - span / 2); view.t1 = Math.min(tMax, view.t0 + span); view.t0 = view.t1 - span;
    drawTimeline(i0);
  }

  // ---- stepping ---------------------------------------------------------------------------
  let i0 = -1; // the current event index
  const slider = $("slider");
  const peRows = [];
  const nearbyRows = [];
  function setup() {
    $("program").textContent = `${str(header.program) || "trace"} \u2014 ${str(header.language)}, ` +
      `${P} PE${P === 1 ? "" : "s"}${header.topology ? " (" + str(header.topology) + ")" : ""}, ` +
      `-O${str(header.opt)}, ${str(header.mode)} mode, clock ${str(header.clock) || "virtual"}; ` +
      `${N} steps (${rewrites.length} rewrites), one step per event`;
    if (endLine && endLine.cut) {
      const note = $("cut-note");
      note.hidden = false;
      note.textContent = `The trace was cut at the limit of ${str(endLine.limit)} events: the run went on after the last step shown.`;
    }
    $("step-count").textContent = String(N);
    slider.max = String(Math.max(1, N));
    slider.disabled = N === 0;
    const body = $("pe-table").tBodies[0];
    for (let p = 0; p < P; p++) {
      const tr = body.insertRow();
      const cells = [];
      for (let k = 0; k < 5; k++) cells.push(tr.insertCell());
      cells[0].textContent = String(p);
      peRows.push({ tr, cells });
    }
    const ol = $("nearby");
    for (let k = 0; k < 15; k++) {
      const li = document.createElement("li");
      li.addEventListener("click", () => { if (li.dataset.step) go(Number(li.dataset.step)); });
      ol.appendChild(li); nearbyRows.push(li);
    }
    if (P > 1) {
      $("timeline-panel").hidden = false;
      $("clock-name").textContent = str(header.clock) === "wall_us" ? "(microseconds)" : "(virtual time)";
    }
  }
  function render() {
    const i = i0;
    $("step-current").textContent = String(i + 1);
    slider.value = String(Math.max(1, i + 1));
    const svgs = [$("graph-before"), $("graph-after")];
    if (i < 0) {
      $("event-title").textContent = "This trace holds no events.";
      fitGraphs(svgs, svgs.map((svg) => drawGraph(svg, newState(), 0, {}, "before")));
      return;
    }
    const e = events[i];
    $("event-title").textContent = `Step ${i + 1}: ${str(e.ev)}` +
      (e.ev === "rewrite" ? ` ${str(e.rule)}${e.clause !== undefined ? ", clause " + str(e.clause) : ""}` : "") + ` on PE ${peOf(e)}`;
    const dl = document.createElement("dl");
    for (const [k, v] of fields(e, i)) {
      const dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = k; dd.textContent = String(v);
      dl.append(dt, dd);
    }
    $("event-body").replaceChildren(dl);
    showSource(e);
    const before = stateAt(i);
    const after = cloneState(before);
    apply(after, e);
    const sizes = [drawGraph(svgs[0], before, i, e, "before"), drawGraph(svgs[1], after, i + 1, e, "after")];
    fitGraphs(svgs, sizes);
    const hidden = Math.max(sizes[0].hidden, sizes[1].hidden);
    $("graph-note").textContent = hidden ? `${hidden} more live goals are not drawn (the drawing keeps the goals this step touches and those sharing their variables).` : "";
    for (let p = 0; p < P; p++) {
      const { tr, cells } = peRows[p];
      const code = laneCode(after, p);
      cells[1].textContent = ["", "running", "idle", "idle, waiting"][code];
      cells[1].className = code === RUNNING ? "" : "state-idle";
      cells[2].textContent = String(after.ready[p]);
      cells[3].textContent = String(after.susp[p]);
      cells[4].textContent = String(after.red[p]);
      tr.className = p === peOf(e) ? "current" : "";
    }
    for (let k = 0; k < nearbyRows.length; k++) {
      const j = i - 7 + k, li = nearbyRows[k];
      li.textContent = j >= 0 && j < N ? summary(j) : "";
      li.dataset.step = j >= 0 && j < N ? String(j + 1) : "";
      li.className = j === i ? "current" : "";
    }
    drawCounts(i + 1);
    if (P > 1) { followCursor(i); drawTimeline(i); }
  }
  function go(step) {
    if (N === 0) return;
    const next = Math.min(N, Math.max(1, Math.round(step))) - 1;
    if (next === i0) return;
    i0 = next;
    render();
  }
  function nextRewrite(dir) {
    let lo = 0, hi = rewrites.length; // first rewrite index > i0
    while (lo < hi) { const mid = (lo + hi) >> 1; if (rewrites[mid] > i0) hi = mid; else lo = mid + 1; }
    const k = dir > 0 ? lo : (rewrites[lo - 1] === i0 ? lo - 2 : lo - 1);
    if (k >= 0 && k < rewrites.length) go(rewrites[k] + 1);
  }

  setup();
  $("prev").addEventListener("click", () => go(i0));
  $("next").addEventListener("click", () => go(i0 + 2));
  slider.addEventListener("input", () => go(Number(slider.value)));
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.altKey || ev.metaKey) return;
    const moves = { ArrowLeft: -1, ArrowRight: 1, PageUp: -10, PageDown: 10 };
    if (ev.key in moves) go(i0 + 1 + moves[ev.key]);
    else if (ev.key === "Home") go(1);
    else if (ev.key === "End") go(N);
    else if (ev.key === "r") nextRewrite(1);
    else if (ev.key === "R") nextRewrite(-1);
    else return;
    ev.preventDefault();
  });
  $("zoom-in").addEventListener("click", () => zoom(0.5));
  $("zoom-out").addEventListener("click", () => zoom(2));
  $("zoom-fit").addEventListener("click", () => { view.t0 = tMin; view.t1 = tMax; drawTimeline(i0); });
  const timeline = $("timeline");
  const timeAt = (ev) => {
    const r = timeline.getBoundingClientRect();
    return view.t0 + ((ev.clientX - r.left - LANE_LABEL) / (r.width - LANE_LABEL - 4)) * (view.t1 - view.t0);
  };
  timeline.addEventListener("wheel", (ev) => { ev.preventDefault(); zoom(ev.deltaY > 0 ? 1.25 : 0.8, timeAt(ev)); }, { passive: false });
  timeline.addEventListener("click", (ev) => { // the event of that PE nearest the clicked time
    const r = timeline.getBoundingClientRect();
    const p = Math.min(P - 1, Math.max(0, Math.floor((ev.clientY - r.top) / laneHeight())));
    const ts = peEventT[p];
    if (!ts.length) return;
    const t = timeAt(ev), k = firstAtOrBefore(ts, t);
    const best = k + 1 < ts.length && Math.abs(ts[k + 1] - t) < Math.abs(ts[k] - t) ? k + 1 : k;
    go(peEvents[p][best] + 1);
  });
  $("counts").addEventListener("click", (ev) => {
    const r = $("counts").getBoundingClientRect();
    go(Math.round(((ev.clientX - r.left) / r.width) * N));
  });
  window.addEventListener("resize", render);
  if (N) go(1); else render();
  document.body.dataset.ready = "1";
  window.hpgremViewer = { steps: N, loadMs: performance.now(), go };
})();
