"""pam.topology: links, named neighbours, minimal deterministic routing, spec parsing."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pam.topology import Topology, TopologyError, parse_topology, squarest_grid

SPECS = [
    ("mesh:4x4", 16), ("mesh:2x8", 16), ("mesh:1x7", 7), ("mesh:7x1", 7), ("mesh:1x1", 1),
    ("mesh:3x5", 15), ("torus:4x4", 16), ("torus:2x2", 4), ("torus:1x5", 5), ("torus:2x8", 16),
    ("torus:3x4", 12), ("torus:5x1", 5), ("torus:1x2", 2), ("ring", 1), ("ring", 2), ("ring", 7),
    ("ring", 8), ("hypercube", 1), ("hypercube", 2), ("hypercube", 16), ("hypercube", 64),
    ("tree", 1), ("tree", 2), ("tree", 7), ("tree", 12), ("tree", 31), ("full", 1), ("full", 2),
    ("full", 9),
]


def topo_strategy() -> st.SearchStrategy[Topology]:
    """Topologies of every kind and many sizes (including degenerate 1-wide grids)."""
    grid = st.builds(lambda k, r, c: parse_topology(f"{k}:{r}x{c}", r * c),
                     st.sampled_from(["mesh", "torus"]), st.integers(1, 9), st.integers(1, 9))
    ring = st.integers(1, 40).map(lambda n: parse_topology("ring", n))
    cube = st.integers(0, 7).map(lambda d: parse_topology("hypercube", 2 ** d))
    tree = st.integers(1, 70).map(lambda n: parse_topology("tree", n))
    full = st.integers(1, 12).map(lambda n: parse_topology("full", n))
    return st.one_of(grid, ring, cube, tree, full)


@st.composite
def topo_and_pair(draw: st.DrawFn) -> tuple[Topology, int, int]:
    t = draw(topo_strategy())
    return t, draw(st.integers(0, t.pes - 1)), draw(st.integers(0, t.pes - 1))


# --- links -----------------------------------------------------------------------------------

def test_mesh_degrees() -> None:
    t = parse_topology("mesh:4x4", 16)
    assert [len(t.neighbours(p)) for p in (0, 3, 12, 15)] == [2, 2, 2, 2]
    assert [len(t.neighbours(p)) for p in (1, 4, 7, 14)] == [3, 3, 3, 3]
    assert [len(t.neighbours(p)) for p in (5, 6, 9, 10)] == [4, 4, 4, 4]
    assert t.neighbours(5) == [1, 4, 6, 9]
    assert t.graph.number_of_edges() == 24


def test_torus_hypercube_ring_tree_full_neighbours() -> None:
    torus = parse_topology("torus:4x4", 16)
    assert all(len(torus.neighbours(p)) == 4 for p in range(16))
    assert torus.neighbours(0) == [1, 3, 4, 12]
    cube = parse_topology("hypercube", 16)
    assert all(len(cube.neighbours(p)) == 4 for p in range(16))
    assert cube.neighbours(5) == [1, 4, 7, 13]
    assert parse_topology("ring", 8).neighbours(0) == [1, 7]
    assert parse_topology("ring", 2).neighbours(0) == [1]
    assert parse_topology("ring", 1).neighbours(0) == []
    tree = parse_topology("tree", 7)
    assert tree.neighbours(0) == [1, 2] and tree.neighbours(1) == [0, 3, 4]
    assert tree.neighbours(6) == [2]
    assert parse_topology("full", 5).neighbours(2) == [0, 1, 3, 4]


@pytest.mark.parametrize("spec,pes", SPECS)
def test_graph_is_simple_and_matches_neighbours(spec: str, pes: int) -> None:
    t = parse_topology(spec, pes)
    g = t.graph
    assert sorted(g.nodes) == list(range(pes))
    assert nx.number_of_selfloops(g) == 0
    assert nx.is_connected(g)
    for p in range(pes):
        assert t.neighbours(p) == sorted(g.neighbors(p))
    if t.kind in ("mesh", "torus"):
        assert max(d for _, d in g.degree) <= 4  # T800: four links
    assert t.diameter() == nx.diameter(g)


def test_thin_tori_are_simple() -> None:
    assert parse_topology("torus:1x2", 2).graph.number_of_edges() == 1
    assert parse_topology("torus:2x2", 4).graph.number_of_edges() == 4
    t = parse_topology("torus:1x5", 5)
    assert t.graph.number_of_edges() == 5 and t.neighbours(0) == [1, 4]
    assert parse_topology("torus:2x8", 16).neighbours(0) == [1, 7, 8]


# --- named neighbours ------------------------------------------------------------------------

def test_mesh_named_neighbours_and_edges() -> None:
    t = parse_topology("mesh:4x4", 16)
    assert [t.neighbour(5, n) for n in ("north", "south", "west", "east")] == [1, 9, 4, 6]
    assert [t.neighbour(0, n) for n in ("north", "west")] == [0, 0]
    assert [t.neighbour(15, n) for n in ("south", "east")] == [15, 15]
    assert t.neighbour(3, "east") == 3 and t.neighbour(12, "south") == 12
    assert t.neighbour(5, "left") == 5 and t.neighbour(5, "parent") == 5  # do not apply


def test_torus_ring_tree_named_neighbours() -> None:
    t = parse_topology("torus:4x4", 16)
    assert [t.neighbour(0, n) for n in ("north", "south", "west", "east")] == [12, 4, 3, 1]
    assert t.neighbour(15, "east") == 12 and t.neighbour(15, "south") == 3
    assert parse_topology("torus:1x4", 4).neighbour(2, "north") == 2
    r = parse_topology("ring", 8)
    assert (r.neighbour(0, "left"), r.neighbour(0, "right"), r.neighbour(7, "right")) == (7, 1, 0)
    assert r.neighbour(3, "north") == 3
    assert parse_topology("ring", 1).neighbour(0, "right") == 0
    tr = parse_topology("tree", 6)
    assert tr.neighbour(0, "parent") == 0 and tr.neighbour(4, "parent") == 1
    assert (tr.neighbour(1, "child", 0), tr.neighbour(1, "child", 1)) == (3, 4)
    assert tr.neighbour(2, "child", 0) == 5 and tr.neighbour(2, "child", 1) == 2  # missing
    assert tr.neighbour(0, "child") == 1 and tr.neighbour(0, "child", 2) == 0
    assert parse_topology("hypercube", 8).neighbour(3, "east") == 3


def test_unknown_neighbour_word() -> None:
    with pytest.raises(TopologyError, match="unknown neighbour name"):
        parse_topology("mesh:2x2", 4).neighbour(0, "up")


# --- routing ---------------------------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(topo_and_pair())
def test_routes_are_shortest_paths_along_links(case: tuple[Topology, int, int]) -> None:
    t, src, dst = case
    path = t.route(src, dst)
    assert path[0] == src and path[-1] == dst
    assert all(t.graph.has_edge(a, b) for a, b in zip(path, path[1:]))
    assert len(path) - 1 == t.hops(src, dst) == nx.shortest_path_length(t.graph, src, dst)
    if src != dst:
        assert t.next_hop(src, dst) == path[1] and path[1] in t.neighbours(src)


@pytest.mark.parametrize("spec,pes", SPECS)
def test_all_pairs_exhaustive(spec: str, pes: int) -> None:
    t = parse_topology(spec, pes)
    lengths = dict(nx.all_pairs_shortest_path_length(t.graph))
    for s in range(pes):
        for d in range(pes):
            assert t.route(s, d) == t.route(s, d)  # deterministic
            assert t.hops(s, d) == len(t.route(s, d)) - 1 == lengths[s][d]


def test_route_to_self() -> None:
    for spec, pes in SPECS:
        t = parse_topology(spec, pes)
        assert all(t.route(p, p) == [p] and t.hops(p, p) == 0 for p in range(pes))
    with pytest.raises(ValueError):
        parse_topology("ring", 4).next_hop(2, 2)
    with pytest.raises(IndexError):
        parse_topology("ring", 4).route(0, 4)


def test_mesh_dimension_order_is_xy() -> None:
    t = parse_topology("mesh:4x4", 16)
    assert t.route(0, 15) == [0, 1, 2, 3, 7, 11, 15]
    assert t.route(15, 0) == [15, 14, 13, 12, 8, 4, 0]
    assert t.route(12, 3) == [12, 13, 14, 15, 11, 7, 3]


def test_torus_shorter_way_and_ties() -> None:
    t = parse_topology("torus:4x4", 16)
    assert t.route(0, 15) == [0, 3, 15]        # west then north, wrapping
    assert t.route(0, 2) == [0, 1, 2]          # tie: toward increasing index
    assert t.route(2, 0) == [2, 3, 0]          # tie: +1, wrapping
    assert t.route(0, 10) == [0, 1, 2, 6, 10]  # X first, then Y


def test_ring_hypercube_tree_full_routes() -> None:
    r = parse_topology("ring", 8)
    assert r.route(0, 3) == [0, 1, 2, 3] and r.route(0, 5) == [0, 7, 6, 5]
    assert r.route(0, 4) == [0, 1, 2, 3, 4] and r.route(5, 1) == [5, 6, 7, 0, 1]
    c = parse_topology("hypercube", 16)
    assert c.route(0, 15) == [0, 1, 3, 7, 15] and c.route(10, 5) == [10, 11, 9, 13, 5]
    tr = parse_topology("tree", 15)
    assert tr.route(7, 14) == [7, 3, 1, 0, 2, 6, 14] and tr.route(0, 11) == [0, 2, 5, 11]
    assert parse_topology("full", 6).route(4, 1) == [4, 1]


def test_large_torus_sampled() -> None:
    t = parse_topology("torus:32x32", 1024)
    assert t.diameter() == 32 and len(t.neighbours(0)) == 4
    assert all(t.hops(0, d) == len(t.route(0, d)) - 1 for d in range(1024))
    assert parse_topology("tree", 1024).diameter() == nx.diameter(parse_topology("tree", 1024).graph)


# --- parsing ---------------------------------------------------------------------------------

def test_default_is_squarest_mesh() -> None:
    assert [parse_topology(None, n).name for n in (16, 8, 7, 1, 12, 36)] == [
        "mesh:4x4", "mesh:2x4", "mesh:1x7", "mesh:1x1", "mesh:3x4", "mesh:6x6"]
    assert squarest_grid(18) == (3, 6)
    assert parse_topology("mesh", 8).name == "mesh:2x4"
    assert parse_topology("torus", 9).name == "torus:3x3"
    assert parse_topology(" Torus:04X4 ", 16).name == "torus:4x4"


@pytest.mark.parametrize("spec,pes,message", [
    ("star", 4, "unknown topology 'star'"),
    ("", 4, "unknown topology ''"),
    ("mesh:4x4", 8, "mesh:4x4 has 16 PEs but --pes is 8"),
    ("torus:2x3", 4, "torus:2x3 has 6 PEs but --pes is 4"),
    ("mesh:4by4", 16, "malformed topology 'mesh:4by4'"),
    ("mesh:4x", 16, "malformed"),
    ("mesh:", 16, "malformed"),
    ("mesh:-4x-4", 16, "malformed"),
    ("mesh:0x4", 0, "--pes must be a positive integer"),
    ("mesh:0x4", 4, "at least one row"),
    ("hypercube", 12, "hypercube needs a power-of-two number of PEs, but --pes is 12"),
    ("ring:8", 8, "ring takes no size"),
    (None, 0, "--pes must be a positive integer"),
])
def test_bad_specs(spec: str | None, pes: int, message: str) -> None:
    with pytest.raises(TopologyError, match=message.replace("-", r"\-")) as info:
        parse_topology(spec, pes)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)
