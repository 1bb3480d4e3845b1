"""Message aggregation (the `aggregate` pass, hpgrem/passes/aggregate.py): what one slice of a
simulated PE sends to one PE travels as one packet. The output is the same with and without it,
on every topology; termination detection stays correct under random link delays; the packets
are counted (`packets` in --stats-json) and `sent` still counts messages."""

from __future__ import annotations

import io
import json

import pytest

from conftest import EXAMPLES, ROOT, compile_source, expected_output, hpgrem
from hpgrem.passes import LEVELS, PASS_TABLE
from hpgrem.passes.aggregate import aggregates
from pam.machine import Machine

PROGRAMS = ["fib.par", "queens.par", "primes.par", "mergesort.par", "producer_consumer.par", "tree.par"]


def _run(name: str, disable=(), **machine):
    path = EXAMPLES / name
    module = compile_source(path.read_text(), str(path), opt=2, disable=disable)
    out = io.StringIO()
    result = Machine(module, stream=out, **machine).run()
    return out.getvalue(), result.stats


def test_the_pass_is_in_the_table_and_on_at_O2_only():
    assert "aggregate" in PASS_TABLE
    assert "aggregate" in LEVELS[2] and "aggregate" not in LEVELS[1]
    path = EXAMPLES / "fib.par"
    assert aggregates(compile_source(path.read_text(), str(path), opt=2))
    assert not aggregates(compile_source(path.read_text(), str(path), opt=2, disable=("aggregate",)))
    assert not aggregates(compile_source(path.read_text(), str(path), opt=1))
    assert aggregates(compile_source(path.read_text(), str(path), opt=0, passes=("aggregate",)))


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("topology", ["mesh:4x4", "ring", "hypercube"])
def test_same_output_with_and_without_aggregation(name, topology):
    expected = expected_output(EXAMPLES / name)
    on, on_stats = _run(name, pes=16, topology=topology)
    off, off_stats = _run(name, ("aggregate",), pes=16, topology=topology)
    assert on == off
    if expected:
        assert on == expected
    # without it every message is a packet; with it a packet carries one message or more
    assert all(p.packets == p.sent for p in off_stats.per_pe)
    assert all(p.packets <= p.sent for p in on_stats.per_pe)


@pytest.mark.parametrize("seed", range(4))
def test_termination_under_random_delays_with_aggregation(seed):
    expected = expected_output(EXAMPLES / "queens.par")
    out, _ = _run("queens.par", pes=16, topology="mesh:4x4", jitter=3.0, seed=seed)
    assert out == expected


def test_packets_fewer_than_messages_on_queens():
    _, stats = _run("queens.par", pes=16, topology="mesh:4x4")
    sent = sum(p.sent for p in stats.per_pe)
    packets = sum(p.packets for p in stats.per_pe)
    assert packets < sent


def test_stats_json_counts_packets(tmp_path):
    out = tmp_path / "s.json"
    r = hpgrem("run", str(EXAMPLES / "fib.par"), "-O2", "--pes", "4", "--stats-json", str(out))
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())["per_pe"]
    assert all("packets" in row and row["packets"] <= row["sent"] for row in rows)
