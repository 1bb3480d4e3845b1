// The two canvases: ready and suspended tasks over the run, and the per-PE timeline with its
// message arrows. Each keeps its unchanging drawing offscreen and adds the step's cursor.
const MAX_ARROWS = 1500; // message arrows drawn in the timeline's window
const MAX_LABELS = 24; // arrows labelled (kind, bytes, hops) when no more are in the window
const LANE_COLOURS = ["#ffffff", "#3d9970", "#d8dde6", "#f6c26b"];

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
const laneHeight = () => Math.max(1, Math.min(26, Math.floor(260 / P)));
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
// Zoom the timeline by `factor` around time `centre` (default: step `i`'s time); `i` is the step shown.
function zoom(i, factor, centre) {
  const span = Math.min(tMax - tMin, Math.max((view.t1 - view.t0) * factor, 1e-9));
  const c = centre === undefined ? (i >= 0 ? num(events[i].t, 0) : (view.t0 + view.t1) / 2) : centre;
  view.t0 = Math.max(tMin, c - span / 2); view.t1 = Math.min(tMax, view.t0 + span); view.t0 = view.t1 - span;
  drawTimeline(i);
}
