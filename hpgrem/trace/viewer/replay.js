// Reading the trace and replaying it: the machine state (live tasks, per-PE counters) at any
// step. A step is one event of the stream in file order (the final "end" line is not a step).
// One pass at load computes what every step needs cheaply (task counts, message pairs,
// bindings, per-PE lanes) and keeps a copy of the state every K steps; the state at any step is
// replayed from the nearest copy.
const READY = 0, SUSPENDED = 1, TRANSIT = 2;
const RUNNING = 1, IDLE = 2, WAITING = 3; // timeline lane codes
const TASK_WORK = new Set(["rewrite", "suspend", "resume", "fail"]);

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
  const old = id == null ? undefined : s.tasks.get(id);
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
        if (isObj(sp) && sp.task != null) {
          setTask(s, sp.task, { id: sp.task, goal: str(sp.goal), vars: strList(sp.vars), pe, st: READY, on: [], depth: depth + 1 });
        }
      }
      break;
    }
    case "suspend":
      if (id != null) setTask(s, id, { id, goal: str(e.goal) || (old ? old.goal : ""), vars: old ? old.vars : strList(e.vars).concat(strList(e.on)),
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
