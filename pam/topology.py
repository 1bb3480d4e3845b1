"""Interconnects of PEs: links, named neighbours and deterministic minimal routing.

A `Topology` says which PEs are linked (a PE sends only to its neighbours) and, for any pair,
which neighbour a message goes to next. Routing is arithmetic (no tables), deterministic and
minimal: dimension order (XY) on a mesh or torus, e-cube on a hypercube, the unique path on a
tree, the shorter way round on a ring, direct on a full graph. `parse_topology` turns the CLI's
`--topology` and `--pes` into one, raising `TopologyError` (one line) on a user error.
"""

from __future__ import annotations

import re
from functools import cached_property
from math import isqrt


KINDS = ("mesh", "torus", "ring", "hypercube", "tree", "full")
NEIGHBOUR_NAMES = frozenset({"north", "south", "east", "west", "left", "right", "parent", "child"})
_GRID_STEPS = {"north": (-1, 0), "south": (1, 0), "west": (0, -1), "east": (0, 1)}
_EXPECTED = "expected mesh:RxC, torus:RxC, ring, hypercube, tree or full"


class TopologyError(ValueError):
    """A user error in `--topology` / `--pes`; `str()` is a one-line message."""


def squarest_grid(pes: int) -> tuple[int, int]:
    """The rows R and columns C with R * C == pes, R <= C and R as large as possible."""
    rows = max(d for d in range(1, isqrt(pes) + 1) if pes % d == 0)
    return rows, pes // rows


def _step(a: int, b: int, n: int, wrap: bool) -> int:
    """One step from coordinate a toward b (a != b) in a dimension of size n; on a wrapping
    dimension the shorter way round, a tie going toward increasing index (+1)."""
    if not wrap:
        return a + 1 if b > a else a - 1
    forward = (b - a) % n
    return (a + 1) % n if forward <= n - forward else (a - 1) % n


def _dist(a: int, b: int, n: int, wrap: bool) -> int:
    """Links between coordinates a and b in a dimension of size n."""
    d = abs(b - a)
    return min(d, n - d) if wrap else d


class Topology:
    """An interconnect of `pes` PEs: a networkx graph plus deterministic routing.

    `name` is the canonical spec ("mesh:4x4", "torus:2x8", "ring", "hypercube", "tree", "full");
    `rows` and `cols` are the grid's shape on a mesh or torus (1 x pes otherwise). On a mesh or
    torus PEs are numbered row-major, pe = r * cols + c, and each has at most 4 links.
    """

    def __init__(self, kind: str, pes: int, rows: int | None = None, cols: int | None = None) -> None:
        if kind not in KINDS:
            raise TopologyError(f"unknown topology {kind!r}: {_EXPECTED}")
        if isinstance(pes, bool) or not isinstance(pes, int) or pes < 1:
            raise TopologyError(f"--pes must be a positive integer, got {pes!r}")
        grid = kind in ("mesh", "torus")
        if grid and (rows is None or cols is None):
            rows, cols = squarest_grid(pes)
        elif not grid:
            rows, cols = 1, pes
        assert rows is not None and cols is not None
        if rows < 1 or cols < 1:
            raise TopologyError(f"{kind}:{rows}x{cols} needs at least one row and one column")
        if rows * cols != pes:
            raise TopologyError(f"{kind}:{rows}x{cols} has {rows * cols} PEs but --pes is {pes}")
        if kind == "hypercube" and pes & (pes - 1):
            raise TopologyError(f"hypercube needs a power-of-two number of PEs, but --pes is {pes}")
        self.kind, self.pes, self.rows, self.cols = kind, pes, rows, cols
        self.name = f"{kind}:{rows}x{cols}" if grid else kind
        self._wrap = kind == "torus"

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, pes={self.pes})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topology) and (self.name, self.pes) == (other.name, other.pes)

    def __hash__(self) -> int:
        return hash((self.name, self.pes))

    def _check(self, *pes: int) -> None:
        for pe in pes:
            if not 0 <= pe < self.pes:
                raise IndexError(f"PE {pe} out of range 0..{self.pes - 1} on {self.name}")

    @cached_property
    def _adjacency(self) -> list[list[int]]:
        """Every PE's neighbours, sorted; built once, on first use."""
        n, kind = self.pes, self.kind
        if kind in ("mesh", "torus"):
            names = tuple(_GRID_STEPS)
            return [sorted({self.neighbour(i, m) for m in names} - {i}) for i in range(n)]
        if kind == "ring":
            return [sorted({(i - 1) % n, (i + 1) % n} - {i}) for i in range(n)]
        if kind == "hypercube":
            return [sorted(i ^ (1 << k) for k in range(n.bit_length() - 1)) for i in range(n)]
        if kind == "tree":
            return [([(i - 1) // 2] if i else []) + [c for c in (2 * i + 1, 2 * i + 2) if c < n]
                    for i in range(n)]
        return [[j for j in range(n) if j != i] for i in range(n)]

    @cached_property
    def graph(self):
        """The links as a simple undirected networkx graph on nodes 0..pes-1 (built lazily;
        networkx is imported only here, so a run that needs no graph does not pay for it)."""
        import networkx as nx
        g = nx.Graph(name=self.name)
        g.add_nodes_from(range(self.pes))
        g.add_edges_from((i, j) for i, nbrs in enumerate(self._adjacency) for j in nbrs if i < j)
        return g

    def neighbours(self, pe: int) -> list[int]:
        """The PEs linked to `pe`, sorted (a fresh list)."""
        self._check(pe)
        return list(self._adjacency[pe])

    def neighbour(self, pe: int, name: str, index: int | None = None) -> int:
        """The PE named `name` from `pe` (`Goal @ Where`): north/south/east/west on a mesh or
        torus, left/right on a ring, parent or child(index) (index 0 or 1, None meaning 0) on a
        tree. A neighbour that does not exist, or a name that does not apply here, means `pe`.
        Raises TopologyError for a word that is no neighbour name at all."""
        self._check(pe)
        if name not in NEIGHBOUR_NAMES:
            raise TopologyError(f"unknown neighbour name {name!r}: expected one of "
                                + ", ".join(sorted(NEIGHBOUR_NAMES)))
        kind, n = self.kind, self.pes
        if kind in ("mesh", "torus") and name in _GRID_STEPS:
            dr, dc = _GRID_STEPS[name]
            r, c = divmod(pe, self.cols)
            r, c = r + dr, c + dc
            if self._wrap:
                r, c = r % self.rows, c % self.cols
            elif not (0 <= r < self.rows and 0 <= c < self.cols):
                return pe
            return r * self.cols + c
        if kind == "ring" and name in ("left", "right"):
            return (pe + (1 if name == "right" else -1)) % n
        if kind == "tree" and name == "parent":
            return (pe - 1) // 2 if pe else pe
        if kind == "tree" and name == "child":
            i = 0 if index is None else index
            child = 2 * pe + 1 + i
            return child if i in (0, 1) and child < n else pe
        return pe

    def next_hop(self, src: int, dst: int) -> int:
        """The neighbour of `src` that a message to `dst` goes to next (src != dst); following
        next hops from src reaches dst along a shortest path."""
        self._check(src, dst)
        if src == dst:
            raise ValueError(f"next_hop needs two different PEs, got {src} twice")
        kind = self.kind
        if kind in ("mesh", "torus"):
            cols = self.cols
            r, c = divmod(src, cols)
            r2, c2 = divmod(dst, cols)
            if c != c2:  # X first: along the row to the right column
                return r * cols + _step(c, c2, cols, self._wrap)
            return _step(r, r2, self.rows, self._wrap) * cols + c
        if kind == "ring":
            return _step(src, dst, self.pes, True)
        if kind == "hypercube":  # e-cube: fix the lowest differing bit
            diff = src ^ dst
            return src ^ (diff & -diff)
        if kind == "tree":  # down if dst is below src, else up
            below, d = dst, dst
            while d > src:
                below, d = d, (d - 1) // 2
            return below if d == src else (src - 1) // 2
        return dst

    def route(self, src: int, dst: int) -> list[int]:
        """The whole path [src, ..., dst] that next hops take; [src] when src == dst."""
        self._check(src, dst)
        path = [src]
        while src != dst:
            src = self.next_hop(src, dst)
            path.append(src)
        return path

    def hops(self, src: int, dst: int) -> int:
        """The number of links on `route(src, dst)`, computed without walking it."""
        self._check(src, dst)
        kind = self.kind
        if kind in ("mesh", "torus"):
            r, c = divmod(src, self.cols)
            r2, c2 = divmod(dst, self.cols)
            return (_dist(r, r2, self.rows, self._wrap) + _dist(c, c2, self.cols, self._wrap))
        if kind == "ring":
            return _dist(src, dst, self.pes, True)
        if kind == "hypercube":
            return (src ^ dst).bit_count()
        if kind == "tree":  # in heap order a larger index is never shallower: climb it
            h = 0
            while src != dst:
                src, dst = (src, (dst - 1) // 2) if dst > src else ((src - 1) // 2, dst)
                h += 1
            return h
        return 0 if src == dst else 1

    @cached_property
    def _diameter(self) -> int:
        n, kind = self.pes, self.kind
        if kind == "mesh":
            return self.rows - 1 + self.cols - 1
        if kind == "torus":
            return self.rows // 2 + self.cols // 2
        if kind == "ring":
            return n // 2
        if kind == "hypercube":
            return n.bit_length() - 1
        if kind == "tree":  # the deepest PE, n - 1, ends a longest path
            return max(self.hops(n - 1, j) for j in range(n))
        return 1 if n > 1 else 0

    def diameter(self) -> int:
        """The largest number of hops between any two PEs (0 on one PE)."""
        return self._diameter


def parse_topology(spec: str | None, pes: int) -> Topology:
    """The topology `--topology spec` names for `--pes pes`. None means the squarest mesh
    (R x C == pes, R <= C); a bare "mesh" or "torus" means the squarest one of that kind.
    Raises TopologyError with a one-line message for any spec that does not fit."""
    if isinstance(pes, bool) or not isinstance(pes, int) or pes < 1:
        raise TopologyError(f"--pes must be a positive integer, got {pes!r}")
    if spec is None:
        return Topology("mesh", pes)
    kind, sep, dims = spec.strip().lower().partition(":")
    if kind not in KINDS:
        raise TopologyError(f"unknown topology {spec!r}: {_EXPECTED}")
    if kind in ("mesh", "torus"):
        if not sep:
            return Topology(kind, pes)
        m = re.fullmatch(r"\s*([0-9]+)\s*x\s*([0-9]+)\s*", dims)
        if not m:
            raise TopologyError(f"malformed topology {spec!r}: expected {kind}:RxC, e.g. {kind}:4x4")
        if len(m[1]) > 9 or len(m[2]) > 9:  # more PEs than any run has (and than int() takes)
            raise TopologyError(f"{kind}:{m[1][:12]}...: too many rows or columns for --pes {pes}")
        return Topology(kind, pes, int(m[1]), int(m[2]))
    if sep:
        raise TopologyError(f"malformed topology {spec!r}: {kind} takes no size "
                            "(the number of PEs comes from --pes)")
    return Topology(kind, pes)
