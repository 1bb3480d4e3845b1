"""A PE's side of distribution: global names, remote reads and binds, task export, stealing,
`&` groups across PEs and the messages that carry all of it.

Everything that crosses a PE boundary is a `Message` handed to the transport. A variable that
leaves its PE is exported under a number of its owner; elsewhere it is a *proxy*: an ordinary
`Var` whose suspension list is a `RemoteWaiters`, so the PE's normal paths notice it. Reading a
proxy (a task suspends on it) sends FETCH once; the owner answers VALUE when the variable is
bound. Binding a proxy sends BIND to the owner, which binds its variable and so wakes every
reader, local or remote. Weighted reference counting (Bevan 1987) lets owners drop exports.

Distribution names no dialect: a runtime registers with each PE's Net the task kinds that may
travel (`add_kind`, pam.task.TaskKind), the codecs of its values (`add_codec`, pam.pack.Codec)
and the message kinds of its own (`add_handler`, sent with `send`). Every message is charged
its true size: a header and its payload by the packing rule (pam.pack.payload_bytes).

A variable may be made on one PE and owned by another (`new_var`): the maker names it on the
owner with a number of its own (negative, so never one the owner gives out) and holds all its
reference weight; the owner makes the variable when the name first reaches it.
"""

from __future__ import annotations

import random
from copy import deepcopy
from typing import Callable

from pam.errors import ProgramFailure
from pam.pack import HEADER, WORD, Codec, GlobalRef, pack, payload_bytes, size_bytes, unpack
from pam.ready import DEFAULT_PRIORITY
from pam.task import AndGroup, Task, TaskKind
from pam.termination import Safra
from pam.topology import NEIGHBOUR_NAMES
from pam.terms import Struct, Var, deref, subterms
from pam.transport import Message

INITIAL_WEIGHT = 1 << 30
# Messages that can make a passive PE active are counted for termination (Safra); a steal
# request to a PE without spare work only earns a NOWORK, so STEAL and NOWORK are control.
CONTROL = frozenset({"TOKEN", "HALT", "STEAL", "NOWORK", "PEEK", "PEEKED"})
STEAL_BACKOFF = (20e-6, 200e-6)  # first and longest wait after a refusal, in (virtual) seconds
STEAL_TTL = 3  # a steal request may travel on this many times before it is refused


class RemoteWaiters(list):
    """The suspension list of a proxy: tasks here wait for the variable `ident` of `owner`."""

    __slots__ = ("owner", "ident", "weight", "fetched")

    def __init__(self, owner: int, ident: int, weight: int) -> None:
        super().__init__()
        self.owner = owner
        self.ident = ident
        self.weight = weight
        self.fetched = False


class RemoteReader:
    """An entry of a local variable's suspension list: PE `pe` waits for its value."""

    __slots__ = ("net", "pe", "ident")

    def __init__(self, net: Net, pe: int, ident: int) -> None:
        self.net = net
        self.pe = pe
        self.ident = ident

    def send_value(self, var: Var) -> None:
        self.net.send("VALUE", self.pe, (self.net.pe.number, self.ident, self.net.pack(var)))


Handler = Callable[[Message], None]


class Net:
    """Distribution state of one PE. `transport.send(message)` delivers (hop by hop) to
    `message.dst`; `now()` is the PE's clock (virtual or wall)."""

    def __init__(self, pe, transport, topology, procs: dict, seed: int, now):
        self.pe = pe
        self.transport = transport
        self.topology = topology
        self.procs = procs  # the PE's steps by key
        self.kinds: dict[type, TaskKind] = {}  # by task class: how tasks leave
        self.kind_names: dict[str, TaskKind] = {}  # by name: how they arrive
        self.codecs: dict[type, Codec] = {}  # by value class: how values are packed
        self.codec_names: dict[str, Codec] = {}  # by name: how they are unpacked
        self.handlers: dict[str, Handler] = {
            "SPAWN": self.got_spawn, "VALUE": self.got_value, "FETCH": self.got_fetch,
            "BIND": self.got_bind, "FINISH": self.got_finish, "FREE": self.got_free,
            "STEAL": self.got_steal, "NOWORK": self.got_nowork, "TOKEN": self.got_token,
            "PEEK": self.got_peek, "PEEKED": self.got_peeked}
        self.own_kinds: set[str] = set()  # message kinds a runtime added (their payloads are copied)
        self.control = set(CONTROL)  # kinds termination detection does not count
        self.made = 0  # variables made here for other PEs to own
        self.rng = random.Random(seed * 7919 + pe.number)
        self.now = now
        self.exports: dict[int, list] = {}      # ident -> [var, weight given out]
        self.export_ident: dict[int, int] = {}  # id(var) -> ident
        self.imports: dict[tuple[int, int], Var] = {}
        self.groups: dict[int, AndGroup] = {}   # exported memberships awaiting FINISH
        self.next_ident = 0
        self.safra = Safra(pe.number, topology.pes)
        self.peeks = 0  # PEEKs awaiting an answer
        self.peeked: set[int] = set()
        self.steal_pending = False
        self.steal_after = 0.0
        self.backoff = STEAL_BACKOFF[0]
        self.victim = self.rng.randrange(len(topology.neighbours(pe.number)) or 1)
        self.tracer = None  # the PE's recorder in a traced run (pam.trace)
        self.refuse_bind = None  # proxy_bound's guard, set by a runtime for a while
        # A runtime's failure boundaries across PEs: bind_origin() names the part of the program
        # (a PARLOG call/3's sub-computation, a tuple of ints) the running task's binds belong
        # to, or None; a BIND carries that name, and at the owner bind_clash(origin) is True
        # when it contained a clash of that BIND (else the clash fails the program).
        self.bind_origin = None
        self.bind_clash = None
        self.relayed = None  # the origin of the BIND being handled (passed on if it is relayed)

    # -- what the runtimes register ----------------------------------------------------------
    def add_kind(self, kind: TaskKind) -> None:
        self.kinds[kind.task_class] = kind
        self.kind_names[kind.name] = kind

    def add_codec(self, codec: Codec) -> None:
        self.codecs[codec.value_class] = codec
        self.codec_names[codec.name] = codec

    def add_handler(self, kind: str, handler: Handler, *, control: bool = False) -> None:
        """Handle messages of a runtime's own `kind` with `handler(message)` on this PE. A
        message that may give a passive PE work is basic (termination detection counts it);
        `control` is for one that never does (a request answered by a refusal)."""
        if kind in self.handlers and kind not in self.own_kinds:
            raise ValueError(f"message kind {kind} is the machine's own")
        self.handlers[kind] = handler
        self.own_kinds.add(kind)
        if control:
            self.control.add(kind)

    # -- sending ------------------------------------------------------------------------------
    def send(self, kind: str, dst: int, payload=None, nbytes: int | None = None) -> None:
        """Send a message of `kind` to PE `dst`, charged `nbytes` (by default its header and
        its payload's packed size). A runtime's own payloads are copied as they leave (as
        pickling copies them under MPI); a term with variables in one is packed first
        (`pack`, and `unpack` on arrival)."""
        if kind not in self.control:
            self.safra.sent()
        if kind in self.own_kinds:
            payload = deepcopy(payload)
        if nbytes is None:
            nbytes = HEADER + payload_bytes(payload)
        stats = self.pe.stats
        stats.sent += 1
        stats.bytes_sent += nbytes
        by_kind = stats.bytes_by_kind
        by_kind[kind] = by_kind.get(kind, 0) + nbytes
        me = self.pe.number
        trace = None if self.tracer is None else self.tracer.send(kind, dst, nbytes, self.topology.hops(me, dst))
        self.transport.send(Message(kind, me, dst, payload, [me], nbytes, trace))

    # -- global names -------------------------------------------------------------------------
    def export_var(self, var: Var) -> GlobalRef:
        """The global name of an unbound variable here (a proxy names its owner's variable)."""
        remote = var.susp
        if type(remote) is RemoteWaiters and remote.weight > 1:
            share = remote.weight // 2
            remote.weight -= share
            return GlobalRef(remote.owner, remote.ident, share)
        # A local variable, or a proxy whose weight cannot be halved any more: then this PE
        # exports the proxy itself as an indirection (reads and binds pass through it).
        ident = self.export_ident.get(id(var))
        if ident is None:
            ident = self.next_ident
            self.next_ident += 1
            self.export_ident[id(var)] = ident
            self.exports[ident] = [var, 0]
        self.exports[ident][1] += INITIAL_WEIGHT
        return GlobalRef(self.pe.number, ident, INITIAL_WEIGHT)

    def new_var(self, owner: int) -> Var:
        """A fresh variable owned by PE `owner` (not this one): here, a proxy holding all its
        weight. Reads and binds go to the owner, as for any variable exported from there."""
        ident = -1 - (self.made * self.topology.pes + self.pe.number)
        self.made += 1
        proxy = Var()
        proxy.susp = RemoteWaiters(owner, ident, INITIAL_WEIGHT)
        self.imports[(owner, ident)] = proxy
        return proxy

    def export_entry(self, ident: int) -> list:
        """[variable, weight given out] of an export here; one that another PE made for this
        one to own (a negative number, `new_var`) is made when its name first arrives."""
        entry = self.exports.get(ident)
        if entry is None:
            if ident >= 0:
                raise KeyError(ident)
            entry = self.exports[ident] = [Var(), INITIAL_WEIGHT]
        return entry

    def resolve(self, ref: GlobalRef) -> Var:
        """The variable a global name stands for on this PE (a proxy, made on first sight)."""
        if ref.owner == self.pe.number:
            entry = self.export_entry(ref.ident)
            entry[1] -= ref.weight  # the reference came home
            return entry[0]
        key = (ref.owner, ref.ident)
        proxy = self.imports.get(key)
        if proxy is not None and type(proxy.susp) is RemoteWaiters:
            proxy.susp.weight += ref.weight
            return proxy
        proxy = Var()
        proxy.susp = RemoteWaiters(ref.owner, ref.ident, ref.weight)
        self.imports[key] = proxy
        return proxy

    def pack(self, term) -> list:
        return pack(term, self.export_var, self.codecs)

    def unpack(self, code: list):
        return unpack(code, self.resolve, self.codec_names)

    def name_variables(self, variables, names: dict) -> None:
        """Give variables names that mean the same on every PE (`_G<owner>_<number>`)."""
        for v in variables:
            if id(v) in names:
                continue
            remote = v.susp
            if type(remote) is RemoteWaiters:
                names[id(v)] = f"_G{remote.owner}_{remote.ident}"
            else:
                ref = self.export_var(v)
                names[id(v)] = f"_G{ref.owner}_{ref.ident}"

    # -- remote reads and binds ---------------------------------------------------------------
    def fetch(self, proxy: Var, remote: RemoteWaiters) -> None:
        remote.fetched = True
        self.send("FETCH", remote.owner, remote.ident)

    def proxy_bound(self, proxy: Var, remote: RemoteWaiters) -> None:
        """A proxy was bound here: the binding goes to the owner, with the proxy's weight. While
        a runtime sets `refuse_bind` (a deep guard's slice), it is called first and may refuse
        the binding by raising (after restoring `proxy.susp = remote`): nothing is sent."""
        if self.refuse_bind is not None:
            self.refuse_bind(proxy, remote)
        del self.imports[(remote.owner, remote.ident)]
        payload = (remote.ident, self.pack(proxy.val), remote.weight)
        origin, member = self.relayed, None
        if origin is None and self.bind_origin is not None:
            origin = self.bind_origin()
            task = self.pe.running
            if origin is not None and task.group is not None:
                # the binding is a member of its task's group until the owner accepts it
                # (FINISH): the sub-computation cannot end before a clash there is known
                task.group.count += 1
                member = self.await_finish(task.group)
        self.send("BIND", remote.owner, payload if origin is None else (*payload, origin, member))

    def got_value(self, m: Message) -> None:
        owner, ident, code = m.payload
        self.bind_proxy(owner, ident, code)

    def bind_proxy(self, owner: int, ident: int, code: list) -> None:
        """The value of the proxy for `ident` of `owner` arrived (VALUE, PEEKED): bind it."""
        proxy = self.imports.pop((owner, ident), None)
        if proxy is None or type(proxy.susp) is not RemoteWaiters:
            return  # bound here meanwhile; our BIND will meet the owner's value there
        remote = proxy.susp
        proxy.susp = list(remote)  # no longer a proxy: binding it must not echo a BIND
        value = self.unpack(code)
        if not self.pe.unify(proxy, value):
            raise ProgramFailure("a remote binding clashed with a local one", None, None, self.pe.number)
        if remote.weight:
            self.send("FREE", owner, (ident, remote.weight))

    def got_bind(self, m: Message) -> None:
        """A binding of our variable `ident` made elsewhere: a clash fails the program, or only
        the part of it that made the binding when the BIND names one (`bind_clash`)."""
        ident, code, weight, *named = m.payload
        origin, member = _origin(named)
        entry = self.export_entry(ident)
        entry[1] -= weight
        value = self.unpack(code)
        self.relayed = origin  # our variable may be a proxy: its BIND then says the same
        try:
            bound = self.pe.unify(entry[0], value)
        finally:
            self.relayed = None
        if not bound and (origin is None or self.bind_clash is None or not self.bind_clash(origin)):
            raise ProgramFailure("bindings made on two PEs clash", None, None, self.pe.number)
        if bound and member is not None:
            self.send("FINISH", member[0], member[1])
        self.maybe_drop(ident)

    def got_fetch(self, m: Message) -> None:
        src, ident = m.src, m.payload
        var = self.export_entry(ident)[0]
        while type(var) is Var and var.val is not None:
            var = var.val
        if type(var) is Var and type(var.susp) is RemoteWaiters:
            # our variable was bound to a proxy: ask its owner on the reader's behalf
            var.susp.append(RemoteReader(self, src, ident))
            if not var.susp.fetched:
                self.fetch(var, var.susp)
        elif type(var) is Var:
            if var.susp is None:
                var.susp = []
            var.susp.append(RemoteReader(self, src, ident))
        else:
            RemoteReader(self, src, ident).send_value(var)

    def peek(self, proxy: Var) -> None:
        """Ask for a proxy's value as it stands now (the final bindings are being printed)."""
        remote = proxy.susp
        self.send("PEEK", remote.owner, remote.ident)

    def got_peek(self, m: Message) -> None:
        src, ident = m.src, m.payload
        var = deref(self.export_entry(ident)[0])
        if type(var) is Var and type(var.susp) is RemoteWaiters:
            self.send("PEEKED", src, (self.pe.number, ident, None, (var.susp.owner, var.susp.ident)))
        else:
            self.send("PEEKED", src, (self.pe.number, ident, None if type(var) is Var else self.pack(var), None))

    def got_peeked(self, m: Message) -> None:
        """A peeked value: bind the proxy to it; an unbound variable elsewhere is peeked in turn."""
        owner, ident, code, further = m.payload
        self.peeks -= 1
        proxy = self.imports.get((owner, ident))
        if proxy is None:
            return
        if further is not None:
            self.peeks += 1
            self.send("PEEK", further[0], further[1])
            self.imports[further] = self.imports.pop((owner, ident))
            proxy.susp.owner, proxy.susp.ident = further
        elif code is not None:
            self.bind_proxy(owner, ident, code)

    def ask_peeks(self, outputs) -> bool:
        """PEEK every unbound proxy reachable from `outputs` not asked yet; False when none."""
        asked = [v for v in _proxies(outputs) if id(v) not in self.peeked]
        for v in asked:
            self.peeked.add(id(v))
            self.peeks += 1
            self.peek(v)
        return bool(asked)

    def got_free(self, m: Message) -> None:
        ident, weight = m.payload
        self.export_entry(ident)[1] -= weight
        self.maybe_drop(ident)

    def maybe_drop(self, ident: int) -> None:
        entry = self.exports.get(ident)
        if entry is not None and entry[1] <= 0 and entry[0].val is not None:
            del self.exports[ident]
            self.export_ident.pop(id(entry[0]), None)

    # -- tasks --------------------------------------------------------------------------------
    def export_task(self, task: Task, dst: int, priority: int | None = None) -> None:
        """Send `task` to run on `dst` (its kind says what travels). Its group here counts it
        as a member until FINISH returns, so the task itself leaves the group: a step that
        sends its own task away just ends (returns None). It keeps its `priority` there (by
        default the current level here: that of the running task, which spawned it); a level
        other than the default travels as one more word of the SPAWN."""
        kind = self.kinds[type(task)]
        self.pe.stats.exported += 1
        if self.tracer is not None:
            self.tracer.exporting(task)
        value = kind.export(task)  # before the group is cut: the kind may read the task's scope
        moved = getattr(kind, "moved", None)
        if moved is not None:
            moved(task, dst)
        group_ref = None
        if task.group is not None:
            group_ref = self.await_finish(task.group)
            task.group = None
        code = self.pack(value)
        payload = (kind.name, task.proc.key, code, task.site, group_ref)
        # the kind, the step and the call site are names known on every PE: a word each
        nbytes = HEADER + 3 * WORD + size_bytes(code) + payload_bytes(group_ref)
        if priority is None:
            priority = self.pe.level
        if priority != DEFAULT_PRIORITY:
            payload += (priority,)
            nbytes += WORD
        self.send("SPAWN", dst, payload, nbytes)

    def await_finish(self, group: AndGroup) -> tuple[int, int]:
        """Name a membership of `group` held elsewhere: a FINISH naming it ends it."""
        gid = self.next_ident
        self.next_ident += 1
        self.groups[gid] = group
        return (self.pe.number, gid)

    def got_spawn(self, m: Message) -> None:
        self.steal_pending = False
        self.backoff = STEAL_BACKOFF[0]
        kind, key, code, site, group_ref, *level = m.payload
        if level and (len(level) > 1 or type(level[0]) is not int):
            raise ValueError(f"malformed SPAWN priority {level!r}")
        task = self.kind_names[kind].arrive(self.procs[key], self.unpack(code), site)
        if group_ref is not None:
            # the stand-in's parent is the group the kind gave the task (a scope it belongs to
            # here, or None); FINISH goes home from the stand-in and never reaches that parent
            task.group = AndGroup(task.group, [], group_ref)
            task.group.count = 1
        if self.tracer is not None:
            self.tracer.arrived(task, m)
        self.pe.enqueue(task, level[0] if level else DEFAULT_PRIORITY)

    def group_finished(self, group: AndGroup) -> None:
        pe, gid = group.home
        self.send("FINISH", pe, gid)

    def got_finish(self, m: Message) -> None:
        group = self.groups.pop(m.payload, None)
        if group is not None:  # None: forgotten, its scope was stopped (`forget_groups`)
            self.pe.finish(group)

    def forget_groups(self, gone: Callable[[AndGroup], bool]) -> None:
        """Drop the exported memberships whose group `gone` says is discarded (a runtime
        stopped the scope it belongs to): a FINISH that still comes for one is ignored."""
        for gid in [gid for gid, g in self.groups.items() if gone(g)]:
            del self.groups[gid]

    def placement(self, where, task: Task) -> int:
        """The PE that `Goal @ Where` names (spec/parlog.md). A placement known only at run
        time that names no PE (an atom that is no neighbour name, an unbound variable, any
        other term) means this PE, as a neighbour that does not exist does."""
        w = deref(where)
        me, n = self.pe.number, self.topology.pes
        if type(w) is int:
            return w % n
        if w == "random":
            return self.rng.randrange(n)
        if type(w) is str:
            return self.topology.neighbour(me, w) if w in NEIGHBOUR_NAMES else me
        if type(w) is Struct and w.name == "child" and len(w.args) == 1 and type(deref(w.args[0])) is int:
            return self.topology.neighbour(me, "child", deref(w.args[0]))
        return me

    # -- stealing -----------------------------------------------------------------------------
    def idle(self) -> None:
        """No task is ready here: ask a neighbour for work, unless asked recently in vain."""
        if self.tracer is not None:
            self.tracer.idle()
        neighbours = self.topology.neighbours(self.pe.number)
        if self.steal_pending or not neighbours or self.now() < self.steal_after:
            return
        self.victim = (self.victim + 1) % len(neighbours)
        self.steal_pending = True
        self.send("STEAL", neighbours[self.victim], (self.pe.number, STEAL_TTL))

    def got_steal(self, m: Message) -> None:
        src, (thief, ttl) = m.src, m.payload
        task, level = self.spare()
        if task is not None:
            self.pe.stats.steals += 1
            if self.tracer is not None:
                self.tracer.steal(task, thief)
            self.export_task(task, thief, level)
            return
        onward = [p for p in self.topology.neighbours(self.pe.number) if p not in (src, thief)]
        if ttl > 0 and onward:
            self.send("STEAL", onward[self.rng.randrange(len(onward))], (thief, ttl - 1))
        else:
            self.send("NOWORK", thief, None)

    def spare_task(self) -> Task | None:
        """The oldest ready task that its kind lets go now (the oldest has the largest grain)."""
        return self.spare()[0]

    def spare(self) -> tuple[Task | None, int | None]:
        """`spare_task`, and the task's priority (None: the current level). With priorities
        (pam/pe.py) the levels are searched most urgent first, each oldest first."""
        pe = self.pe
        ready = pe.ready
        if pe.levels is not None:
            return self._spare_levels(pe)
        if len(ready) < 2:
            return None, None
        return self._spare_from(ready), None

    def _spare_levels(self, pe) -> tuple[Task | None, int | None]:
        if pe.ready_count() < 2:
            return None, None
        for level in sorted({pe.level, *pe.levels}, reverse=True):
            queue = pe.ready if level == pe.level else pe.levels[level]
            t = self._spare_from(queue)
            if t is not None:
                if not queue and queue is not pe.ready:
                    del pe.levels[level]  # `levels` holds no empty queue
                return t, level
            if level == pe.level and level in pe.levels:  # the current level's held tasks
                held = pe.levels[level]
                t = self._spare_from(held)
                if t is not None:
                    if not held:
                        del pe.levels[level]
                    return t, level
        return None, None

    def _spare_from(self, ready) -> Task | None:
        """The oldest task of the queue `ready` that its kind lets go now, taken out of it."""
        kinds = self.kinds
        for i in range(min(len(ready), 256)):
            t = ready[i]
            kind = kinds.get(type(t))
            if kind is not None and kind.spare(t):
                del ready[i]
                return t
        return None

    def got_nowork(self, m: Message) -> None:
        self.steal_pending = False
        self.steal_after = self.now() + self.backoff
        self.backoff = min(self.backoff * 2, STEAL_BACKOFF[1])

    def got_token(self, m: Message) -> None:
        self.safra.got_token(m.payload)

    # -- receiving ----------------------------------------------------------------------------
    def receive(self, m: Message) -> None:
        """Count a message that arrived here and hand it to its kind's handler."""
        kind = m.kind
        stats = self.pe.stats
        stats.received += 1
        stats.bytes_received += m.nbytes
        stats.hops += len(m.hops) - 1
        if kind not in self.control:
            self.safra.received()
        if self.tracer is not None:
            self.tracer.receive(m)
        handler = self.handlers.get(kind)
        if handler is None:
            raise ValueError(f"unknown message kind {kind}")
        handler(m)


def _proxies(terms) -> list[Var]:
    """Unbound proxies reachable from `terms` (which may be cyclic: `subterms` ends on them)."""
    found, seen = [], set()
    for t in subterms(terms):
        if type(t) is Var and type(t.susp) is RemoteWaiters and id(t) not in seen:
            seen.add(id(t))
            found.append(t)
    return found


def _origin(named: list) -> tuple:
    """A BIND's origin and membership (`proxy_bound`), checked: it crossed a transport."""
    if not named:
        return None, None
    origin, member = named

    def ints(x, n=None) -> bool:
        return type(x) is tuple and all(type(i) is int for i in x) and n in (None, len(x))

    if not ints(origin) or not (member is None or ints(member, 2)):
        raise ValueError(f"malformed BIND origin {named!r}")
    return origin, member


__all__ = ["Net", "RemoteReader", "RemoteWaiters"]

