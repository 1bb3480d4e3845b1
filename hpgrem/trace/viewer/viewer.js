// The page: the step panel, the controls and what each step redraws.

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
  $("graph-note").textContent = hidden ? `${hidden} more live goals are not drawn (the drawing keeps the goals this step touches, those sharing their variables, then its PE's).` : "";
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
$("zoom-in").addEventListener("click", () => zoom(i0, 0.5));
$("zoom-out").addEventListener("click", () => zoom(i0, 2));
$("zoom-fit").addEventListener("click", () => { view.t0 = tMin; view.t1 = tMax; drawTimeline(i0); });
const timeline = $("timeline");
const timeAt = (ev) => {
  const r = timeline.getBoundingClientRect();
  return view.t0 + ((ev.clientX - r.left - LANE_LABEL) / (r.width - LANE_LABEL - 4)) * (view.t1 - view.t0);
};
timeline.addEventListener("wheel", (ev) => { ev.preventDefault(); zoom(i0, ev.deltaY > 0 ? 1.25 : 0.8, timeAt(ev)); }, { passive: false });
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
