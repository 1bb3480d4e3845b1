"""A PE's side of distribution: global names, remote reads and binds, task export, stealing,
`&` groups across PEs and the messages that carry all of it.

Everything that crosses a PE boundary is a `Message` handed to the transport. A variable that
leaves its PE is exported under a number of its owner; elsewhere it is a *proxy*: an ordinary
`Var` whose suspension list is a `RemoteWaiters`, so the PE's normal paths notice it. Reading a
proxy (a task suspends on it) sends FETCH once; the owner answers VALUE when the variable is
bound. Binding a proxy sends BIND to the owner, which binds its variable and so wakes every
reader, local or remote. Weighted reference counting (Bevan 1987) lets owners drop exports.

Distribution names no dialect: a runtime registers with each PE's Net the task kinds that may
travel (`add_kind`, pam.task.TaskKind) and the codecs of its values (`add_codec`, pam.pack.Codec).
"""

from __future__ import annotations

import random

from pam.errors import ProgramFailure
from pam.pack import Codec, GlobalRef, pack, size_bytes, unpack
from pam.task import AndGroup, Task, TaskKind
from pam.termination import Safra
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

    # -- what the runtimes register ----------------------------------------------------------
    def add_kind(self, kind: TaskKind) -> None:
        self.kinds[kind.task_class] = kind
        self.kind_names[kind.name] = kind

    def add_codec(self, codec: Codec) -> None:
        self.codecs[codec.value_class] = codec
        self.codec_names[codec.name] = codec

    # -- sending ------------------------------------------------------------------------------
    def send(self, kind: str, dst: int, payload, nbytes: int = 8) -> None:
        if kind not in CONTROL:
            self.safra.sent()
        stats = self.pe.stats
        stats.sent += 1
        stats.bytes_sent += nbytes
        self.transport.send(Message(kind, self.pe.number, dst, payload, [self.pe.number], nbytes))

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

    def resolve(self, ref: GlobalRef) -> Var:
        """The variable a global name stands for on this PE (a proxy, made on first sight)."""
        if ref.owner == self.pe.number:
            entry = self.exports[ref.ident]
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
        """A proxy was bound here: the binding goes to the owner, with the proxy's weight."""
        del self.imports[(remote.owner, remote.ident)]
        code = self.pack(proxy.val)
        self.send("BIND", remote.owner, (remote.ident, code, remote.weight), size_bytes(code))

    def got_value(self, owner: int, ident: int, code: list) -> None:
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

    def got_bind(self, ident: int, code: list, weight: int) -> None:
        entry = self.exports[ident]
        entry[1] -= weight
        value = self.unpack(code)
        if not self.pe.unify(entry[0], value):
            raise ProgramFailure("bindings made on two PEs clash", None, None, self.pe.number)
        self.maybe_drop(ident)

    def got_fetch(self, src: int, ident: int) -> None:
        var = self.exports[ident][0]
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

    def got_peek(self, src: int, ident: int) -> None:
        var = deref(self.exports[ident][0])
        if type(var) is Var and type(var.susp) is RemoteWaiters:
            self.send("PEEKED", src, (self.pe.number, ident, None, (var.susp.owner, var.susp.ident)))
        else:
            self.send("PEEKED", src, (self.pe.number, ident, None if type(var) is Var else self.pack(var), None))

    def got_peeked(self, owner: int, ident: int, code, further) -> None:
        """A peeked value: bind the proxy to it; an unbound variable elsewhere is peeked in turn."""
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
            self.got_value(owner, ident, code)

    def ask_peeks(self, outputs) -> bool:
        """PEEK every unbound proxy reachable from `outputs` not asked yet; False when none."""
        asked = [v for v in _proxies(outputs) if id(v) not in self.peeked]
        for v in asked:
            self.peeked.add(id(v))
            self.peeks += 1
            self.peek(v)
        return bool(asked)

    def got_free(self, ident: int, weight: int) -> None:
        self.exports[ident][1] -= weight
        self.maybe_drop(ident)

    def maybe_drop(self, ident: int) -> None:
        entry = self.exports.get(ident)
        if entry is not None and entry[1] <= 0 and entry[0].val is not None:
            del self.exports[ident]
            self.export_ident.pop(id(entry[0]), None)

    # -- tasks --------------------------------------------------------------------------------
    def export_task(self, task: Task, dst: int) -> None:
        """Send `task` to run on `dst` (its kind says what travels). Its group here counts it
        as a member until FINISH returns, so the task itself leaves the group: a step that
        sends its own task away just ends (returns None)."""
        kind = self.kinds[type(task)]
        self.pe.stats.exported += 1
        group_ref = None
        if task.group is not None:
            gid = self.next_ident
            self.next_ident += 1
            self.groups[gid] = task.group
            group_ref = (self.pe.number, gid)
            task.group = None
        code = self.pack(kind.export(task))
        payload = (kind.name, task.proc.key, code, task.site, group_ref)
        self.send("SPAWN", dst, payload, size_bytes(code) + 8)

    def got_spawn(self, payload) -> None:
        kind, key, code, site, group_ref = payload
        task = self.kind_names[kind].arrive(self.procs[key], self.unpack(code), site)
        if group_ref is not None:
            task.group = AndGroup(None, [], group_ref)
            task.group.count = 1
        self.pe.push(task)

    def group_finished(self, group: AndGroup) -> None:
        pe, gid = group.home
        self.send("FINISH", pe, gid)

    def got_finish(self, gid: int) -> None:
        self.pe.finish(self.groups.pop(gid))

    def placement(self, where, task: Task) -> int:
        """The PE that `Goal @ Where` names (spec/parlog.md)."""
        w = deref(where)
        me, n = self.pe.number, self.topology.pes
        if type(w) is int:
            return w % n
        if w == "random":
            return self.rng.randrange(n)
        if type(w) is str:
            return self.topology.neighbour(me, w)
        if type(w) is Struct and w.name == "child" and len(w.args) == 1 and type(deref(w.args[0])) is int:
            return self.topology.neighbour(me, "child", deref(w.args[0]))
        return me

    # -- stealing -----------------------------------------------------------------------------
    def idle(self) -> None:
        """No task is ready here: ask a neighbour for work, unless asked recently in vain."""
        neighbours = self.topology.neighbours(self.pe.number)
        if self.steal_pending or not neighbours or self.now() < self.steal_after:
            return
        self.victim = (self.victim + 1) % len(neighbours)
        self.steal_pending = True
        self.send("STEAL", neighbours[self.victim], (self.pe.number, STEAL_TTL))

    def got_steal(self, src: int, payload) -> None:
        thief, ttl = payload
        task = self.spare_task()
        if task is not None:
            self.pe.stats.steals += 1
            self.export_task(task, thief)
            return
        onward = [p for p in self.topology.neighbours(self.pe.number) if p not in (src, thief)]
        if ttl > 0 and onward:
            self.send("STEAL", onward[self.rng.randrange(len(onward))], (thief, ttl - 1))
        else:
            self.send("NOWORK", thief, None)

    def spare_task(self) -> Task | None:
        """The oldest ready task that its kind lets go now (the oldest has the largest grain)."""
        ready = self.pe.ready
        if len(ready) < 2:
            return None
        kinds = self.kinds
        for i in range(min(len(ready), 256)):
            t = ready[i]
            kind = kinds.get(type(t))
            if kind is not None and kind.spare(t):
                del ready[i]
                return t
        return None

    def got_nowork(self) -> None:
        self.steal_pending = False
        self.steal_after = self.now() + self.backoff
        self.backoff = min(self.backoff * 2, STEAL_BACKOFF[1])

    # -- receiving ----------------------------------------------------------------------------
    def receive(self, m: Message) -> None:
        kind = m.kind
        stats = self.pe.stats
        stats.received += 1
        stats.bytes_received += m.nbytes
        stats.hops += len(m.hops) - 1
        if kind not in CONTROL:
            self.safra.received()
        if kind == "SPAWN":
            self.steal_pending = False
            self.backoff = STEAL_BACKOFF[0]
            self.got_spawn(m.payload)
        elif kind == "VALUE":
            self.got_value(*m.payload)
        elif kind == "FETCH":
            self.got_fetch(m.src, m.payload)
        elif kind == "BIND":
            self.got_bind(*m.payload)
        elif kind == "FINISH":
            self.got_finish(m.payload)
        elif kind == "FREE":
            self.got_free(*m.payload)
        elif kind == "STEAL":
            self.got_steal(m.src, m.payload)
        elif kind == "NOWORK":
            self.got_nowork()
        elif kind == "TOKEN":
            self.safra.got_token(m.payload)
        elif kind == "PEEK":
            self.got_peek(m.src, m.payload)
        elif kind == "PEEKED":
            self.got_peeked(*m.payload)
        else:
            raise ValueError(f"unknown message kind {kind}")


def _proxies(terms) -> list[Var]:
    """Unbound proxies reachable from `terms` (which may be cyclic: `subterms` ends on them)."""
    found, seen = [], set()
    for t in subterms(terms):
        if type(t) is Var and type(t.susp) is RemoteWaiters and id(t) not in seen:
            seen.add(id(t))
            found.append(t)
    return found


__all__ = ["Net", "RemoteReader", "RemoteWaiters"]
