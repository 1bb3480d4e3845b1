"""``hpgrem plan``: the JSON interface, the search table and the exit statuses of spec/cli.md."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backend.planner.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_every_figure(capsys):
    out = run_json(capsys, "--model", "gpt3-175b", "--gpus", "1024", "--gpu", "a100-80gb",
                   "--tp", "8", "--pp", "16", "--zero", "1", "--tokens", "300e9")
    assert out["params"] == 174_615_846_912
    memory = out["memory"]
    assert set(memory) >= {"parameters", "gradients", "optimizer", "activations", "buffers", "total"}
    assert memory["total"] == pytest.approx(sum(memory[k] for k in (
        "parameters", "gradients", "optimizer", "activations", "buffers")), abs=5)
    assert memory["activations"] == out["activations"]["first_stage"]
    assert out["activations"]["per_layer"] == 2048 * 12288 * 23  # sbh(10 + 24/8 + 80/8)
    assert out["layout"] == {"tp": 8, "pp": 16, "dp": 8, "virtual_stages": 1, "micro_batch": 1,
                             "global_batch": 1536, "microbatches": 192, "zero": 1,
                             "sequence_parallel": False, "recompute": "none", "offload": "none",
                             "schedule": "1f1b"}
    assert out["bubble_fraction"] == 15 / 192
    for key in ("flops_per_iteration", "step_time_s", "mfu", "training_time_s"):
        assert isinstance(out[key], float) and out[key] > 0
    assert 0 < out["mfu"] < 1
    assert out["units"]["memory.*"] == "bytes" and out["units"]["step_time_s"] == "seconds"


def test_python_dash_m():
    result = subprocess.run(
        [sys.executable, "-m", "backend.planner", "--model", "gpt2", "--gpus", "8", "--zero", "2",
         "--json"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["params"] == 124_439_808 and out["layout"]["dp"] == 8


def test_custom_shape_and_params_only(capsys):
    out = run_json(capsys, "--layers", "12", "--hidden", "768", "--heads", "12", "--vocab", "50257",
                   "--seq", "1024")
    assert out["params"] == 124_439_808 and out["model"]["name"] == "custom"
    bare = run_json(capsys, "--params", "175e9", "--gpus", "1024", "--tp", "8", "--pp", "16",
                    "--zero", "1")
    assert bare["memory"]["activations"] is None and bare["activations"]["per_layer"] is None
    assert bare["params_per_gpu"] == round(175e9 / 128)
    # 6 FLOPs per parameter and token without recomputation.
    assert bare["flops_per_iteration"] == pytest.approx(6 * 175e9 * 1536 * 2048)


def test_max_params_reproduces_zero_table_2(capsys):
    # Rajbhandari et al. 2020, Table 2, MP 1 on 64 GPUs of 32 GB: P_os+g+p fits 128B parameters.
    out = run_json(capsys, "--max-params", "--gpu-memory", "32e9", "--gpus", "64", "--zero", "3")
    assert out["max_params"] == pytest.approx(128e9)
    out = run_json(capsys, "--max-params", "--gpu-memory", "32GB", "--gpus", "1024", "--tp", "16",
                   "--zero", "0")
    assert out["max_params"] == pytest.approx(32e9)  # MP 16 baseline: "32B"


def test_search_table(capsys):
    assert main(["--model", "gpt3-175b", "--gpus", "1024", "--search"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:4] == ["rank", "tp", "pp", "dp"]
    rows = lines[3:]
    assert len(rows) == 10 and [int(r.split()[0]) for r in rows] == list(range(1, 11))


def test_search_json_is_ranked_and_fits(capsys):
    out = run_json(capsys, "--model", "megatron-18.4b", "--gpus", "256", "--search",
                   "--global-batch", "1024")
    results = out["results"]
    assert 0 < len(results) <= 10 and out["search"]["fitting"] >= len(results)
    times = [r["step_time_s"] for r in results]
    assert times == sorted(times)
    assert all(r["memory"]["fits"] and r["gpus"] == 256 for r in results)
    # Fixed flags stay fixed.
    fixed = run_json(capsys, "--model", "megatron-18.4b", "--gpus", "256", "--search",
                     "--global-batch", "1024", "--tp", "8", "--zero", "1")
    assert {(r["layout"]["tp"], r["layout"]["zero"]) for r in fixed["results"]} == {(8, 1)}


@pytest.mark.parametrize("argv,message", [
    (["--model", "gpt3-175b", "--gpus", "1024", "--tp", "8", "--pp", "16", "--dp", "4"],
     "tp * pp * dp"),
    (["--model", "gpt3-175b", "--tp", "5"], "not divisible by tp=5"),
    (["--model", "gpt-17"], "unknown model"),
    (["--model", "gpt2", "--gpu", "tpu-v4"], "unknown GPU"),
    (["--model", "gpt3-175b", "--gpus", "64", "--tp", "8", "--pp", "8", "--zero", "3"], None),  # ZeRO-3 with pp
    (["--model", "gpt3-175b", "--gpus", "64", "--tp", "8", "--pp", "8", "--global-batch", "100",
      "--virtual-stages", "2"], "divisible by pp"),
    (["--model", "gpt2", "--layers", "12"], None),
    (["--model", "gpt2", "--tp", "0"], "--tp must be positive"),
    ([], "nothing to plan"),
])
def test_usage_errors_exit_2_with_one_line(capsys, argv, message):
    if message is None:  # a preset with an override is fine
        assert main(argv) == 0
        return
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpgrem plan: error: ") and message in err and err.count("\n") == 1
    assert "Traceback" not in err


def test_bad_flags_exit_2(capsys):
    assert main(["--model", "gpt2", "--frobnicate"]) == 2
    assert main(["--model", "gpt2", "--tp", "eight"]) == 2
    assert main(["--model", "gpt2", "--recompute", "sometimes"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert main(["--help"]) == 0
