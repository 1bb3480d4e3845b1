"""`hpgrem train` and `hpgrem plot` (docs/tensor.md): the configuration's errors, the data, a
tiny model that learns, the metrics and saved parameters, and the same losses on one PE, two
simulated PEs and `mpiexec -n 2`."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

from backend.tensor.config import TrainConfig, load_config
from backend.tensor.data import TextData, successor_rule, synthetic_batch, synthetic_floor
from backend.tensor.train import learning_rate
from hpgrem.driver.cli import main

TINY = str(ROOT / "examples" / "llm" / "tiny.toml")
SMALL = str(ROOT / "examples" / "llm" / "small.toml")
MPIEXEC = shutil.which("mpiexec")


def train(capsys, *args: str) -> tuple[int, str]:
    """`hpgrem train ARGS` in this process: its status and stderr."""
    status = main(["train", *args])
    return status, capsys.readouterr().err


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# -- the configuration -------------------------------------------------------------------------
def test_the_examples_load_and_every_key_of_small_toml_is_read():
    tiny, small = load_config(TINY), load_config(SMALL)
    assert (tiny.model.n_layer, tiny.model.d_model, tiny.train.steps) == (2, 32, 40)
    assert (small.model.n_layer, small.model.d_model, small.model.vocab, small.train.batch) == (4, 128, 64, 16)
    assert small.checkpoint.dir == "checkpoints/small" and small.parallel.schedule == "1f1b"


def test_flags_override_keys(tmp_path):
    config = load_config(TINY, {("train", "steps"): 3, ("parallel", "dp"): 2, ("train", "dtype"): "float64"})
    assert (config.train.steps, config.parallel.dp, config.train.dtype, config.ranks) == (3, 2, "float64", 2)
    assert TrainConfig().model == load_config(write(tmp_path, "empty.toml", "")).model  # every key has a default


BAD_CONFIGS = [
    ("malformed TOML", "[model]\nn_layer = 2\nn_head = = 2\n", [],
     ["bad.toml:3:10: error: invalid TOML", "n_head = = 2\n         ^"]),
    ("unknown key", "[train]\nstpes = 3\n", [], ["unknown key 'stpes' in [train] (did you mean 'steps'?)"]),
    ("key in the wrong section", "[model]\nlr = 0.1\n", [], ["unknown key 'lr' in [model] (it belongs in [train])"]),
    ("unknown section", "[modle]\nn_layer = 2\n", [], ["unknown section [modle] (did you mean 'model'?)"]),
    ("wrong type", "[train]\nsteps = \"ten\"\n", [], ['[train] steps must be an integer, got "ten"']),
    ("a bool is no integer", "[model]\nn_layer = true\n", [], ["[model] n_layer must be an integer, got true"]),
    ("out of range", "[train]\nsteps = 0\n", [], ["[train] steps must be at least 1, got 0"]),
    ("unknown dtype", "[train]\ndtype = \"float16\"\n", [], ["[train] dtype must be one of float32, float64"]),
    ("heads do not divide", "[model]\nn_head = 3\nd_model = 32\n", [],
     ["[model] d_model = 32 is not divisible by n_head = 3"]),
    ("batch does not divide", "[train]\nbatch = 6\n", ["--dp", "4"],
     ["[train] batch = 6 is not divisible by dp * micro_batches = 4 * 1"]),
    ("layout against the PEs", "", ["--pes", "2"], ["the layout needs dp * tp * pp = 1 * 1 * 1 = 1 PEs, not --pes 2"]),
    ("topology against the PEs", "", ["--dp", "2", "--topology", "mesh:3x3"], ["mesh:3x3"]),
    ("tp against the heads", "[parallel]\ntp = 4\n", [], ["[parallel] tp = 4 does not divide n_head = 2"]),
    ("zero without dp", "[parallel]\nzero = 1\n", [], ["[parallel] zero = 1 shards over the data-parallel ranks"]),
    ("pipeline chunks against the layers", "", ["--pp", "2", "--virtual-stages", "2"],
     ["[parallel] pp * virtual_stages = 4 chunks need at least as many layers, n_layer = 2"]),
    ("interleaving against the micro-batches", "[model]\nn_layer = 4\n", ["--pp", "2", "--virtual-stages", "2"],
     ["needs micro_batches divisible by pp = 2, got 1"]),
    ("checkpoint writing", "[checkpoint]\nwrite = \"later\"\n", [],
     ['[checkpoint] write must be one of sync, async, got "later"']),
    ("missing data file", "", ["--data", "no-such-file.txt"], ["no-such-file.txt: no such data file"]),
    ("unwritable metrics", "", ["--metrics", "no/such/dir/m.jsonl"], ["m.jsonl: cannot write: no such directory"]),
    ("bad flag value", "", ["--steps", "many"], ["argument --steps: invalid int value: 'many'"]),
    ("unknown flag", "", ["--stpes", "3"], ["unrecognized arguments: --stpes"]),
]


@pytest.mark.parametrize("text, flags, expected", [c[1:] for c in BAD_CONFIGS], ids=[c[0] for c in BAD_CONFIGS])
def test_a_bad_configuration_is_one_clear_error_and_status_2(tmp_path, capsys, monkeypatch, text, flags, expected):
    monkeypatch.chdir(tmp_path)
    status, err = train(capsys, write(tmp_path, "bad.toml", text), *flags)
    assert status == 2, err
    assert "Traceback" not in err and "internal error" not in err
    for part in expected:
        assert part in err


def test_a_missing_configuration_file(capsys, tmp_path):
    status, err = train(capsys, str(tmp_path / "none.toml"))
    assert status == 2 and err == f"hpgrem: error: {tmp_path / 'none.toml'}: no such configuration file\n"


# -- the data ------------------------------------------------------------------------------------
def test_synthetic_batches_are_regenerated_and_follow_the_rule():
    tokens, targets = synthetic_batch(7, 64, 32, 50, seed=3)
    again, _ = synthetic_batch(7, 64, 32, 50, seed=3)
    assert tokens.dtype == np.int64 and tokens.shape == (64, 32) and np.array_equal(tokens, again)
    assert np.array_equal(tokens[:, 1:], targets[:, :-1])  # targets: the next tokens
    assert not np.array_equal(tokens, synthetic_batch(8, 64, 32, 50, seed=3)[0])
    follows = np.mean(successor_rule(50, 3)[tokens] == targets)
    assert 0.85 < follows < 0.95  # the rule, but for the 10% noise
    assert synthetic_floor(64) < math.log(64) / 4


def test_text_is_bytes_with_a_held_out_split(tmp_path):
    text = "héllo wörld, " * 40
    data = TextData.load(write(tmp_path, "t.txt", text), seq_len=8)
    raw = np.frombuffer(text.encode(), dtype=np.uint8)
    assert np.array_equal(np.concatenate([data.train, data.held_out]), raw)
    assert len(data.held_out) == int(len(raw) * 0.1)
    tokens, targets = data.batch(1, 4, 8, seed=0)
    assert tokens.shape == (4, 8) and np.array_equal(tokens[:, 1:], targets[:, :-1])
    held, _ = data.held_out_batch(4, 8)
    assert np.array_equal(held, data.held_out_batch(4, 8)[0])


@pytest.mark.parametrize("content, message", [(b"\xff\xfe bad", "not UTF-8 text (byte 0)"),
                                              (b"short", "5 bytes is too short for seq_len 16")])
def test_an_unusable_text_file_is_refused(tmp_path, capsys, content, message):
    path = tmp_path / "data.txt"
    path.write_bytes(content)
    status, err = train(capsys, TINY, "--data", str(path))
    assert status == 2 and message in err and "Traceback" not in err


def test_learning_rate_warms_up_linearly():
    assert [learning_rate(k, 1.0, 4) for k in (1, 2, 4, 9)] == [0.25, 0.5, 1.0, 1.0]
    assert learning_rate(1, 0.5, 0) == 0.5


# -- training --------------------------------------------------------------------------------------
def read_metrics(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tiny_trains_writes_metrics_and_saves_the_parameters(tmp_path, capsys):
    metrics, saved = tmp_path / "m.jsonl", tmp_path / "p.npz"
    status, err = train(capsys, TINY, "--metrics", str(metrics), "--save", str(saved), "--stats")
    assert status == 0, err
    rows = read_metrics(metrics)
    assert [r["step"] for r in rows] == list(range(1, 41))
    for r in rows:
        assert set(r) == {"step", "loss", "tokens_per_s", "lr", "grad_norm"}
        assert all(math.isfinite(r[k]) and r[k] > 0 for k in ("loss", "tokens_per_s", "lr", "grad_norm"))
    assert rows[0]["lr"] == pytest.approx(3e-3 / 5) and rows[-1]["lr"] == pytest.approx(3e-3)
    assert abs(rows[0]["loss"] - math.log(32)) < 0.3  # an untrained model knows nothing
    assert rows[-1]["loss"] < rows[0]["loss"] - 1.0  # and it learns
    assert f"step 40: loss {rows[-1]['loss']:.4f}" in err
    assert "compute_s" in err and "comm_s" in err and "idle_s" in err  # --stats, per PE
    from backend.tensor.gpt import ModelShape, init_params
    initial = init_params(ModelShape(2, 2, 32, 16, 32), 0, "float32")
    with np.load(saved) as params:
        assert set(params.files) == set(initial)
        assert all(params[k].shape == initial[k].shape and params[k].dtype == np.float32 for k in initial)
        assert not np.array_equal(params["wte"], initial["wte"])


def test_a_text_file_trains_and_reports_its_held_out_loss(tmp_path, capsys):
    text = write(tmp_path, "text.txt", (ROOT / "README.md").read_text(encoding="utf-8"))
    metrics = tmp_path / "m.jsonl"
    status, err = train(capsys, TINY, "--data", text, "--steps", "12", "--metrics", str(metrics))
    assert status == 0, err
    rows = read_metrics(metrics)
    held = [r["step"] for r in rows if "held_out_loss" in r]
    assert held[0] == 1 and held[-1] == 12 and len(held) >= 3
    assert abs(rows[0]["held_out_loss"] - math.log(256)) < 0.5  # 256 byte values, none known yet
    assert rows[-1]["held_out_loss"] < rows[0]["held_out_loss"]
    assert "held-out loss" in err


def losses(capsys, tmp_path, name: str, *flags: str) -> list[float]:
    metrics = tmp_path / f"{name}.jsonl"
    status, err = train(capsys, TINY, "--steps", "6", "--dtype", "float64", "--metrics", str(metrics), *flags)
    assert status == 0, err
    return [r["loss"] for r in read_metrics(metrics)]


def test_data_parallel_on_simulated_pes_computes_the_same_training(tmp_path, capsys):
    one = losses(capsys, tmp_path, "one")
    two = losses(capsys, tmp_path, "two", "--dp", "2", "--topology", "ring")
    assert np.allclose(two, one, rtol=1e-9, atol=0)


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
def test_mpiexec_n2_computes_the_same_training_as_one_pe(tmp_path, capsys):
    one = losses(capsys, tmp_path, "one")
    metrics = tmp_path / "mpi.jsonl"
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "train", TINY, "--dp", "2",
                        "--steps", "6", "--dtype", "float64", "--metrics", str(metrics)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("step 6: loss") == 1  # rank 0 alone reports
    assert np.allclose([row["loss"] for row in read_metrics(metrics)], one, rtol=1e-9, atol=0)


def test_mpiexec_ranks_must_match_the_layout(tmp_path):
    if MPIEXEC is None:
        pytest.skip("mpiexec is not installed")
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "train", TINY, "--steps", "1"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 2 and "mpiexec started 2" in r.stderr and "Traceback" not in r.stderr


# -- plot -----------------------------------------------------------------------------------------------
def metrics_file(tmp_path) -> str:
    rows = [{"step": k, "loss": 3.0 / k, "tokens_per_s": 100.0, "lr": 1e-3, "grad_norm": 1.0} for k in range(1, 6)]
    rows[-1]["held_out_loss"] = 0.7
    return write(tmp_path, "m.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


def test_plot_draws_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'hpgrem[plot]')")
    out = tmp_path / "loss.png"
    assert main(["plot", metrics_file(tmp_path), "-o", str(out)]) == 0, capsys.readouterr().err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert main(["plot", metrics_file(tmp_path), "-o", str(tmp_path / "loss.png")]) == 2
    assert "hpgrem plot needs matplotlib: pip install 'hpgrem[plot]'" in capsys.readouterr().err


def test_plot_refuses_a_file_that_is_not_metrics(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'hpgrem[plot]')")
    bad = write(tmp_path, "bad.jsonl", '{"step": 1, "loss": 2.0}\nnot json\n')
    assert main(["plot", bad, "-o", str(tmp_path / "loss.png")]) == 2
    assert "bad.jsonl:2: not a JSON line" in capsys.readouterr().err


# -- the benchmark's measurements ------------------------------------------------------------------
@pytest.mark.parametrize("side", ["ours", "torch"])
def test_the_benchmark_measures_tokens_per_second(side):
    if side == "torch":
        pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
    r = subprocess.run([sys.executable, "-m", "hpgrem.driver.bench.tensor", side, TINY, "3", "1"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    rates = json.loads(r.stdout)
    assert rates["tokens_per_s"] > 0
    assert side == "torch" or rates["peak_bytes_per_pe"] > 0


def test_a_terminal_gets_a_progress_bar_with_loss_and_tokens_per_second():
    """On a terminal (a pseudo-terminal of 100 columns here) stderr shows tqdm's bar."""
    import fcntl
    import pty
    import struct
    import termios
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    r = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", "train", TINY, "--steps", "3"],
                       stdout=subprocess.PIPE, stderr=follower, timeout=300, cwd=ROOT)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal is closed and read
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert r.returncode == 0 and r.stdout == b""
    text = shown.decode("utf-8", "replace")
    assert "3/3" in text and "loss=" in text and "tok_s=" in text
