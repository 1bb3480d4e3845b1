"""The trace renderings: Graphviz snapshots and the HTML viewer, the viewer driven in headless
Chromium through Selenium (one browser for the module). Traces are built here, small ones by hand
in the shape of trace stream v1 (docs/trace.md) and a synthetic one of 100,000 events."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, hpgrem

from hpgrem.trace.dot import default_steps, write_snapshots
from hpgrem.trace.html import trace_json, viewer_html, write_viewer

HOSTILE = '</script><script>window.pwned=1</script><!-- "q" \\N & \u2028'


class Stream:
    """Builds a trace stream: each event gets its PE's next sequence number."""

    def __init__(self, program: str, language: str, pes: int, sources: dict[str, list[str]]):
        self.header = {
            "trace": "hpgrem", "version": 1, "program": program, "language": language,
            "pes": pes, "topology": f"ring:{pes}" if pes > 1 else None, "opt": 1,
            "mode": "simulated", "clock": "virtual", "sources": sources,
        }
        self.events: list[dict[str, Any]] = []
        self.seq = [0] * pes

    def add(self, ev: str, pe: int, t: float, **fields: Any) -> None:
        self.events.append({"ev": ev, "pe": pe, "seq": self.seq[pe], "t": t, **fields})
        self.seq[pe] += 1

    def end(self) -> list[dict[str, Any]]:
        return self.events + [{"ev": "end", "events": len(self.events), "cut": False, "limit": None}]


PC = "examples/parlog/producer_consumer.par"


def parlog_stream() -> Stream:
    """A producer and consumer of two elements: the consumer suspends on the stream and the
    producer's binding wakes it."""
    s = Stream(PC, "parlog", 1, {PC: Path(PC).read_text().splitlines()})
    s.add("rewrite", 0, 0, task=0, rule="main/0", clause=1, span=[PC, 12, 1], redex="main", vars=[],
          bind={}, depth=0, spawn=[
              {"task": 1, "goal": "produce(1, 2, _1)", "vars": ["_1"]},
              {"task": 2, "goal": "consume(_1, 0, _2)", "vars": ["_1", "_2"]},
              {"task": 3, "goal": "write(_2)", "vars": ["_2"]}])
    s.add("suspend", 0, 1, task=2, goal="consume(_1, 0, _2)", on=["_1"])
    s.add("suspend", 0, 2, task=3, goal="write(_2)", on=["_2"])
    s.add("rewrite", 0, 3, task=1, rule="produce/3", clause=2, span=[PC, 6, 1],
          redex="produce(1, 2, _1)", vars=["_1"], bind={"_1": "[1|_3]"}, depth=1,
          spawn=[{"task": 4, "goal": "produce(2, 2, _3)", "vars": ["_3"]}])
    s.add("resume", 0, 4, task=2, by="_1")
    s.add("rewrite", 0, 5, task=2, rule="consume/3", clause=2, span=[PC, 10, 1],
          redex="consume([1|_3], 0, _2)", vars=["_3", "_2"], bind={}, depth=1,
          spawn=[{"task": 5, "goal": "consume(_3, 1, _2)", "vars": ["_3", "_2"]}])
    s.add("suspend", 0, 6, task=5, goal="consume(_3, 1, _2)", on=["_3"])
    s.add("rewrite", 0, 7, task=4, rule="produce/3", clause=2, span=[PC, 6, 1],
          redex="produce(2, 2, _3)", vars=["_3"], bind={"_3": "[2|_4]"}, depth=2,
          spawn=[{"task": 6, "goal": "produce(3, 2, _4)", "vars": ["_4"]}])
    s.add("resume", 0, 8, task=5, by="_3")
    s.add("rewrite", 0, 9, task=6, rule="produce/3", clause=1, span=[PC, 5, 1],
          redex="produce(3, 2, _4)", vars=["_4"], bind={"_4": "[]"}, depth=3, spawn=[])
    s.add("rewrite", 0, 10, task=5, rule="consume/3", clause=2, span=[PC, 10, 1],
          redex="consume([2|[]], 1, _2)", vars=["_2"], bind={}, depth=2,
          spawn=[{"task": 7, "goal": "consume([], 3, _2)", "vars": ["_2"]}])
    s.add("rewrite", 0, 11, task=7, rule="consume/3", clause=1, span=[PC, 9, 1],
          redex="consume([], 3, _2)", vars=["_2"], bind={"_2": "3"}, depth=3, spawn=[])
    s.add("resume", 0, 12, task=3, by="_2")
    s.add("rewrite", 0, 13, task=3, rule="write/1", clause=1, span=[PC, 12, 1],
          redex="write(3)", vars=[], bind={}, depth=1, spawn=[])
    s.add("terminate", 0, 14, status="success", suspended=[])
    return s


FIB = "examples/ml/par_fib.sml"


def ml_fork_join() -> Stream:
    """pfib 13 forks two calls and waits for both results."""
    s = Stream(FIB, "ml", 1, {FIB: Path(FIB).read_text().splitlines()})
    s.add("rewrite", 0, 0, task=0, rule="pfib", span=[FIB, 4, 5], redex="pfib 13", vars=["r0"],
          bind={}, depth=0, spawn=[{"task": 1, "goal": "pfib 12", "vars": ["a"]},
                                   {"task": 2, "goal": "pfib 11", "vars": ["b"]}])
    s.add("suspend", 0, 1, task=0, goal="a + b", on=["a", "b"])
    s.add("rewrite", 0, 2, task=1, rule="pfib", span=[FIB, 4, 5], redex="pfib 12", vars=["a"],
          bind={}, depth=1, spawn=[], inline=False)
    s.add("rewrite", 0, 3, task=1, rule="fib", span=[FIB, 2, 5], redex="fib 12", vars=["a"],
          bind={"a": "144"}, depth=2, spawn=[], inline=True)
    s.add("resume", 0, 4, task=0, by="a")
    s.add("suspend", 0, 5, task=0, goal="144 + b", on=["b"])
    s.add("rewrite", 0, 6, task=2, rule="fib", span=[FIB, 2, 5], redex="fib 11", vars=["b"],
          bind={"b": "89"}, depth=1, spawn=[])
    s.add("resume", 0, 7, task=0, by="b")
    s.add("rewrite", 0, 8, task=0, rule="pfib", span=[FIB, 8, 8], redex="144 + 89", vars=["r0"],
          bind={"r0": "233"}, depth=0, spawn=[])
    s.add("terminate", 0, 9, status="success", suspended=[])
    return s


def four_pes() -> Stream:
    """Work spread from PE 0 over a ring of 4 by TASK messages, results back as VALUE ones."""
    s = Stream(PC, "parlog", 4, {PC: Path(PC).read_text().splitlines()})
    s.add("rewrite", 0, 0, task=0, rule="main/0", clause=1, span=[PC, 12, 1], redex="main",
          vars=[], bind={}, depth=0, spawn=[
              {"task": 4 * k + 4, "goal": f"work({k}, _{k})", "vars": [f"_{k}", "_9"]} for k in range(4)])
    for pe in (1, 2, 3):
        s.add("idle", pe, 0)
    for k, pe in enumerate((1, 2, 3)):
        hops = min(pe, 4 - pe)
        s.add("send", 0, 1 + k, msg=k, kind="TASK", to=pe, bytes=96, hops=hops, task=4 * k + 8)
        s.add("receive", pe, 10 + 5 * hops, msg=k, kind="TASK", **{"from": 0}, bytes=96)
    s.add("rewrite", 0, 5, task=4, rule="work/2", clause=1, span=[PC, 5, 1], redex="work(0, _0)",
          vars=["_0"], bind={"_0": "0"}, depth=1, spawn=[])
    s.add("suspend", 0, 6, task=20, goal="sum(_1, _2, _3)", on=["_1"])
    s.add("idle", 0, 7)
    for k, pe in enumerate((1, 2, 3)):
        hops = min(pe, 4 - pe)
        t = 20 + 5 * hops
        s.add("rewrite", pe, t, task=4 * k + 8, rule="work/2", clause=1, span=[PC, 5, 1],
              redex=f"work({k + 1}, _{k + 1})", vars=[f"_{k + 1}"], bind={f"_{k + 1}": str(k + 1)},
              depth=1, spawn=[])
        s.add("send", pe, t + 1, msg=10 + k, kind="VALUE", to=0, bytes=24, hops=hops)
        s.add("idle", pe, t + 2)
        s.add("receive", 0, t + 8 + 5 * hops, msg=10 + k, kind="VALUE", **{"from": pe}, bytes=24)
    s.add("resume", 0, 60, task=20, by="_1")
    # PE 1 steals the woken goal: the victim reports it and sends it over.
    s.add("steal", 0, 61, task=20, **{"from": 0}, to=1)
    s.add("send", 0, 62, msg=20, kind="TASK", to=1, bytes=80, hops=1, task=20)
    s.add("receive", 1, 70, msg=20, kind="TASK", **{"from": 0}, bytes=80, hops=1)
    s.add("rewrite", 1, 71, task=20, rule="sum/3", clause=1, span=[PC, 9, 1], redex=HOSTILE,
          vars=["_1", "_2", "_3"], bind={"_3": "6"}, depth=1, spawn=[])
    s.add("terminate", 0, 72, status="success", suspended=[])
    return s


def synthetic(n_events: int, pes: int = 8) -> Stream:
    """A tree of tasks spread over `pes` PEs on a ring: every rewrite creates two goals while the
    tree grows, every fifth ready goal travels to the next PE, leaves bind a result."""
    s = Stream("synthetic/tree.par", "parlog", pes, {"synthetic/tree.par": ["tree(N, R) <- ..."]})
    queues: list[deque[tuple[int, int]]] = [deque() for _ in range(pes)]
    queues[0].append((0, 0))
    clock = [0] * pes
    next_task, next_msg = 1, 0
    in_flight: deque[tuple[int, int, int, int, int]] = deque()  # msg, to, task, depth, due

    def receive(msg: int, to: int, task: int, depth: int, due: int) -> None:
        clock[to] = max(clock[to], due)
        s.add("receive", to, clock[to], msg=msg, kind="TASK", **{"from": (to - 1) % pes}, bytes=64)
        queues[to].append((task, depth))

    def room() -> bool:  # a step adds a rewrite and a send, which owes a receive
        return len(s.events) + len(in_flight) < n_events - 2

    while room():
        progressed = False
        for pe in range(pes):
            if not room():
                break
            clock[pe] += 3
            while in_flight and in_flight[0][1] == pe and in_flight[0][4] <= clock[pe]:
                receive(*in_flight.popleft())
            if not queues[pe]:
                if not s.events or s.events[-1]["ev"] != "idle" or s.events[-1]["pe"] != pe:
                    s.add("idle", pe, clock[pe])
                continue
            progressed = True
            task, depth = queues[pe].popleft()
            spawn = []
            if depth < 40:
                for _ in range(2):
                    spawn.append({"task": next_task, "goal": f"tree({depth + 1}, _{next_task})",
                                  "vars": [f"_{next_task}", f"_{task}"]})
                    queues[pe].append((next_task, depth + 1))
                    next_task += 1
            s.add("rewrite", pe, clock[pe], task=task, rule="tree/2", clause=1 + (not spawn),
                  span=["synthetic/tree.par", 1, 1], redex=f"tree({depth}, _{task})", vars=[f"_{task}"],
                  bind={} if spawn else {f"_{task}": "leaf"}, depth=depth, spawn=spawn)
            if len(queues[pe]) > 4 and next_msg % 5 == 0:
                moved, mdepth = queues[pe].pop()
                to = (pe + 1) % pes
                s.add("send", pe, clock[pe] + 1, msg=next_msg, kind="TASK", to=to, bytes=64, hops=1, task=moved)
                in_flight.append((next_msg, to, moved, mdepth, clock[pe] + 10))
            next_msg += 1
        if not progressed and not in_flight:
            break
    while in_flight:  # every send has its receive
        receive(*in_flight.popleft())
    while len(s.events) < n_events:
        s.add("idle", len(s.events) % pes, max(clock) + 1)
    return s


# ---- without a browser ------------------------------------------------------------------------

def test_trace_json_cannot_close_the_script_element():
    s = four_pes()
    page = viewer_html(s.header, s.end())
    assert page.count("</script") == 2  # the data element's and the code's own
    assert "<!--" not in page
    embedded = trace_json(s.header, s.end())
    assert json.loads(embedded)["events"][-3]["redex"] == HOSTILE


def test_viewer_fetches_nothing():
    s = parlog_stream()
    page = viewer_html(s.header, s.end())
    assert "default-src 'none'" in page
    assert "unsafe-inline" not in page  # only the page's own script and style, by their hashes
    for attribute in (" src=", " href="):
        for hit in page.split(attribute)[1:]:
            assert hit.startswith('"data:'), hit[:40]


def test_trace_with_nan_is_refused_in_one_sentence():
    s = parlog_stream()
    s.events[0]["t"] = float("nan")
    with pytest.raises(ValueError, match="cannot be embedded"):
        viewer_html(s.header, s.events)


def test_default_snapshots_are_rewrites_spread_over_the_run():
    events = parlog_stream().end()
    steps = default_steps(events)
    assert steps[0] == 1 and steps[-1] == 14
    assert len(steps) == 6
    assert all(events[k - 1]["ev"] == "rewrite" for k in steps)


def test_snapshot_marks_the_redex_and_draws_a_shared_variable_once(tmp_path):
    s = parlog_stream()
    written = write_snapshots(s.header, s.end(), tmp_path, [4])
    dot = (tmp_path / "step-4.dot").read_text()
    assert tmp_path / "step-4.dot" in written
    # Before step 4 the consumer (suspended) and the producer share _1: one variable node.
    assert dot.count('label="_1"') == 1
    assert dot.count("-> v0") == 2  # the producer (redex) and the consumer
    assert 'color="#d7263d", penwidth=3, label="produce(1, 2, _1)' in dot
    assert 'label="creates"' in dot
    assert '"filled,rounded,dashed", fillcolor="0.000 0.22 1.000", color="#f18f01"' in dot


def test_snapshot_escapes_trace_text(tmp_path):
    s = four_pes()
    last_rewrite = max(i for i, e in enumerate(s.events) if e["ev"] == "rewrite") + 1
    write_snapshots(s.header, s.end(), tmp_path, [last_rewrite])
    dot = (tmp_path / f"step-{last_rewrite}.dot").read_text()
    assert '\\"q\\" \\\\N &' in dot
    if shutil.which("dot"):
        svg = (tmp_path / f"step-{last_rewrite}.svg").read_text()
        assert "&lt;/script&gt;" in svg and "<script" not in svg


def test_snapshots_colour_goals_by_their_pe(tmp_path):
    s = four_pes()
    first_on_pe1 = next(i for i, e in enumerate(s.events) if e["ev"] == "rewrite" and e["pe"] == 1) + 1
    write_snapshots(s.header, s.end(), tmp_path, [first_on_pe1])
    dot = (tmp_path / f"step-{first_on_pe1}.dot").read_text()
    # The redex and two goals moved by TASK messages, each filled with its PE's colour.
    assert 'fillcolor="0.618 0.22 1.000", color="#d7263d", penwidth=3, label="work(1, _1)\\ntask 8, PE 1"' in dot
    assert 'fillcolor="0.236 0.22 1.000", color="gray40", penwidth=1, label="work(2, _2)\\ntask 12, PE 2"' in dot
    assert "task 16, PE 3" in dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
def test_snapshots_are_rendered_to_svg(tmp_path):
    s = ml_fork_join()
    written = write_snapshots(s.header, s.end(), tmp_path, None)
    svgs = [p for p in written if p.suffix == ".svg"]
    assert len(svgs) == len(written) // 2 == len(default_steps(s.end()))
    assert all(p.read_text().lstrip().startswith("<?xml") for p in svgs)


def test_without_dot_a_note_and_dot_files_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    s = ml_fork_join()
    written = write_snapshots(s.header, s.end(), tmp_path, [1, 9])
    assert [p.name for p in written] == ["step-1.dot", "step-9.dot"]
    assert "dot program is not installed" in capsys.readouterr().err


def test_a_step_outside_the_trace_is_refused(tmp_path):
    s = ml_fork_join()
    with pytest.raises(ValueError, match=r"step 11 is outside the trace, whose steps are 1\.\.10"):
        write_snapshots(s.header, s.end(), tmp_path, [11])


# ---- in the browser ---------------------------------------------------------------------------

def _png_pixels(png: bytes) -> tuple[int, int, int, bytes]:
    """Width, height, bytes per pixel and the unfiltered pixel rows of an 8-bit PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8
            bpp = {2: 3, 6: 4, 0: 1, 4: 2}[colour]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = bytearray(), bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows += line
        prev = line
    return width, height, bpp, bytes(rows)


def _distinct_colours(png: bytes) -> int:
    width, height, bpp, rows = _png_pixels(png)
    return len({rows[k:k + 3] for k in range(0, len(rows), bpp * 7)})


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module; skips, saying what is missing, where it cannot run."""
    try:
        from selenium import webdriver
    except ImportError:
        pytest.skip("selenium is not installed (pip install selenium, in the test extra)")
    chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver_path = shutil.which("chromedriver")
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium chromium-driver)")
    if driver_path is None:
        pytest.skip("chromedriver is not installed (Debian: apt-get install chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver_path), options=options)
    yield driver
    driver.quit()


def _open(browser, header, events, path: Path) -> None:
    """Load the viewer for a trace and check the page reported no error."""
    write_viewer(header, events, path)
    browser.get(path.as_uri())
    assert browser.execute_script("return document.body.dataset.ready") == "1"
    _no_console_errors(browser)


def _no_console_errors(browser) -> None:
    problems = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert problems == []


def _text(browser, element_id: str) -> str:
    return browser.execute_script(f"return document.getElementById('{element_id}').textContent")


def _slide(browser, step: int) -> None:
    browser.execute_script(
        "const s = document.getElementById('slider'); s.value = arguments[0];"
        " s.dispatchEvent(new Event('input'));", step)


@pytest.mark.parametrize("trace", [parlog_stream, ml_fork_join, four_pes])
def test_slider_walks_every_step(browser, tmp_path, trace):
    s = trace()
    _open(browser, s.header, s.end(), tmp_path / "t.html")
    assert _text(browser, "step-count") == str(len(s.events))
    assert browser.find_element("id", "slider").get_attribute("max") == str(len(s.events))
    for step in range(1, len(s.events) + 1):
        _slide(browser, step)
        assert _text(browser, "step-current") == str(step)
        title = _text(browser, "event-title")
        event = s.events[step - 1]
        assert title.startswith(f"Step {step}: {event['ev']}")
        if event["ev"] == "rewrite":
            assert event["rule"] in title
            # The redex is marked in the graph before the rewrite, with its text.
            marked = browser.execute_script(
                "return [...document.querySelectorAll('#graph-before g.redex text')].map(t => t.textContent)")
            assert len(marked) == 1 and event["redex"][:20] in marked[0]
    _no_console_errors(browser)


def test_buttons_and_keys_move_one_step(browser, tmp_path):
    s = parlog_stream()
    _open(browser, s.header, s.end(), tmp_path / "t.html")
    from selenium.webdriver.common.keys import Keys
    browser.find_element("id", "next").click()
    browser.find_element("id", "next").click()
    assert _text(browser, "step-current") == "3"
    browser.find_element("id", "prev").click()
    assert _text(browser, "step-current") == "2"
    body = browser.find_element("tag name", "body")
    body.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    assert _text(browser, "step-current") == "5"
    body.send_keys(Keys.END)
    assert _text(browser, "step-current") == str(len(s.events))
    body.send_keys(Keys.ARROW_RIGHT)  # stays on the last step
    assert _text(browser, "step-current") == str(len(s.events))
    body.send_keys(Keys.HOME, "r")  # the next rewrite after step 1 is step 4
    assert _text(browser, "step-current") == "4"
    _no_console_errors(browser)


def test_source_line_suspensions_and_wakeups_are_shown(browser, tmp_path):
    s = parlog_stream()
    _open(browser, s.header, s.end(), tmp_path / "t.html")
    _slide(browser, 4)
    source = browser.execute_script("return document.querySelector('#source .hit').textContent")
    assert source.endswith("produce(I, N, [I|Is]) <- I =< N : I1 is I + 1, produce(I1, N, Is).")
    _slide(browser, 2)
    assert "waits for_1" in _text(browser, "event-body")
    _slide(browser, 5)
    assert "woken by_1 = [1|_3]" in _text(browser, "event-body")
    # After the producer's binding, the stream variable is drawn bound.
    labels = browser.execute_script(
        "return [...document.querySelectorAll('#graph-after g.var text')].map(t => t.textContent)")
    assert "_1 = [1|_3]" in labels


def test_four_pes_timeline_messages_and_counts(browser, tmp_path):
    s = four_pes()
    _open(browser, s.header, s.end(), tmp_path / "t.html")
    assert browser.find_element("id", "timeline-panel").is_displayed()
    send = next(i for i, e in enumerate(s.events) if e["ev"] == "send") + 1
    _slide(browser, send)
    body = _text(browser, "event-body")
    assert "messageTASK" in body.replace("#0 ", "") and "hops1" in body and "received" in body
    rows = browser.execute_script(
        "return [...document.querySelectorAll('#pe-table tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
    assert len(rows) == 4 and [r[0] for r in rows] == ["0", "1", "2", "3"]
    assert rows[0][4] == "1"  # PE 0 has made one reduction
    png = browser.find_element("id", "timeline").screenshot_as_png
    assert _distinct_colours(png) >= 4  # lanes in several states and the arrows
    # The hostile goal text is shown as text and ran nothing.
    _slide(browser, len(s.events) - 1)
    assert HOSTILE.replace("\u2028", "") in _text(browser, "event-body").replace("\u2028", "")
    assert browser.execute_script("return window.pwned === undefined")
    _no_console_errors(browser)


def test_a_cut_trace_says_so(browser, tmp_path):
    s = parlog_stream()
    _open(browser, s.header, s.events, tmp_path / "whole.html")
    assert not browser.find_element("id", "cut-note").is_displayed()
    cut = s.events[:6] + [{"ev": "end", "events": 6, "cut": True, "limit": 6}]
    _open(browser, s.header, cut, tmp_path / "cut.html")
    assert _text(browser, "step-count") == "6"
    assert "cut at the limit of 6 events" in _text(browser, "cut-note")


def test_screenshot_is_not_blank(browser, tmp_path):
    s = parlog_stream()
    _open(browser, s.header, s.end(), tmp_path / "t.html")
    _slide(browser, 4)
    assert _distinct_colours(browser.get_screenshot_as_png()) > 20


def test_hundred_thousand_events_load_in_the_browser(browser, tmp_path):
    s = synthetic(100_000)
    assert len(s.events) == 100_000
    _open(browser, s.header, s.end(), tmp_path / "big.html")
    load_ms = browser.execute_script("return window.hpgremViewer.loadMs")
    print(f"100,000 events: viewer ready {load_ms:.0f} ms after navigation start")
    assert load_ms < 10_000
    assert _text(browser, "step-count") == "100000"
    for step in (50_000, 99_999, 100_000, 1, 73_421):
        _slide(browser, step)
        assert _text(browser, "step-current") == str(step)
    # An idle step touches no goal: the graph still shows some of the many live ones.
    idle = max(i for i, e in enumerate(s.events[:60_000]) if e["ev"] == "idle") + 1
    _slide(browser, idle)
    drawn = browser.execute_script("return document.querySelectorAll('#graph-before g.goal').length")
    assert drawn == 24 and "more live goals are not drawn" in _text(browser, "graph-note")
    _no_console_errors(browser)


# ---- the tutorial's traces (docs/teaching.md), made by the command ---------------------------

def _first(events: list[dict[str, Any]], test) -> int:
    return next(i for i, e in enumerate(events) if test(e)) + 1


def _second_wakeup(events: list[dict[str, Any]]) -> int:
    """The rewrite whose binding makes the second wake-up: the producer fills a slot the
    consumer waits for."""
    resumes = [i for i, e in enumerate(events) if e["ev"] == "resume"]
    return resumes[1]


TUTORIAL = {
    "stream": (["examples/parlog/bounded_buffer.par"], _second_wakeup),
    "fork-join": (["examples/ml/par_fib.sml", "--pes", "2", "--trace-limit", "600"],
                  lambda events: _first(events, lambda e: e["ev"] == "rewrite" and e["pe"] == 1)),
    "loops-at-O2": (["examples/parlog/nrev.par", "-O2"],
                    lambda events: _first(events, lambda e: e.get("inline") and e["rule"] == "nrev/2")),
    "four-pes": (["examples/parlog/placement.par", "--pes", "4", "--topology", "ring"],
                 lambda events: _first(events, lambda e: e["ev"] == "rewrite" and e["pe"] == 2)),
}


@pytest.mark.parametrize("name", sorted(TUTORIAL))
def test_tutorial_traces_in_the_viewer(browser, tmp_path, name):
    """The runs docs/teaching.md walks through, rendered by `hpgrem trace --html` and shown at
    the step the tutorial discusses. With HPGREM_DOC_IMAGES=DIR the screenshots are kept there
    (docs/images is made so)."""
    args, pick = TUTORIAL[name]
    page, stream = tmp_path / f"{name}.html", tmp_path / f"{name}.jsonl"
    done = hpgrem("trace", *args, "--html", str(page), "--trace", str(stream), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    events = lines[1:-1]
    browser.get(page.as_uri())
    _no_console_errors(browser)
    assert _text(browser, "step-count") == str(len(events)) == str(lines[-1]["events"])
    step = pick(events)
    _slide(browser, step)
    assert _text(browser, "step-current") == str(step)
    browser.set_window_size(1280, 1150)
    try:
        browser.execute_script("window.scrollTo(0, 0)")
        png = browser.get_screenshot_as_png()
    finally:
        browser.set_window_size(1280, 900)
    assert _distinct_colours(png) > 20
    if os.environ.get("HPGREM_DOC_IMAGES"):
        folder = Path(os.environ["HPGREM_DOC_IMAGES"])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"viewer-{name}.png").write_bytes(png)


def test_a_crowded_snapshot_keeps_the_redex_and_its_neighbours(tmp_path):
    s = synthetic(3_000)
    step = max(i for i, e in enumerate(s.events) if e["ev"] == "rewrite" and e["pe"] == 3) + 1
    redex = s.events[step - 1]
    write_snapshots(s.header, s.end(), tmp_path, [step])
    dot = (tmp_path / f"step-{step}.dot").read_text()
    assert "more live goals not drawn" in dot
    assert dot.count("shape=box") == 60 + len(redex["spawn"])
    assert f'penwidth=3, label="{redex["redex"]}\\ntask {redex["task"]}, PE 3"' in dot


def test_a_dot_that_fails_leaves_the_dot_file_and_a_note(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "dot"
    broken.write_text("#!/bin/sh\necho 'syntax error in line 1' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(broken))
    s = ml_fork_join()
    written = write_snapshots(s.header, s.end(), tmp_path / "out", [2])
    assert [p.name for p in written] == ["step-2.dot"]
    assert "dot could not render" in capsys.readouterr().err
