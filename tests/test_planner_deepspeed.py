"""DeepSpeed's ZeRO-2/3 model-state estimators against the examples of DeepSpeed's documentation,
docs/code-docs/source/memory.rst ("Memory Requirements"), which prints bytes / 2**30 as "GB"."""

import json

import pytest

from backend.planner import zero2_estimate, zero3_estimate
from backend.planner.cli import main


def gib(value: int) -> str:
    return f"{value / 2**30:.2f}"


def test_zero2_cold_example_3b_on_8_gpus():
    # estimate_zero2_model_states_mem_needs_all_cold(total_params=2851e6, num_gpus_per_node=8,
    # num_nodes=1): "127.45GB | 5.31GB | offload_optimizer=cpu".
    offload = zero2_estimate(2851e6, 8, 1, cpu_offload=True)
    assert (gib(offload.cpu_bytes), gib(offload.gpu_bytes)) == ("127.45", "5.31")
    # "127.45GB | 15.93GB | offload_optimizer=none" was printed with the formula before DeepSpeed
    # PR #5099, 4Ψ + 16Ψ/N = 17.106e9 bytes. The code now computes 2Ψ + 18Ψ/N: 12.117e9 bytes.
    none = zero2_estimate(2851e6, 8, 1, cpu_offload=False)
    assert gib(none.cpu_bytes) == "127.45"
    assert none.gpu_bytes == 2 * 2851e6 + int(18 * 2851e6 / 8) == 12_116_750_000
    assert gib(4 * 2851e6 + 16 * 2851e6 / 8) == "15.93"


# estimate_zero3_model_states_mem_needs_all_cold(total_params=2851e6, largest_layer_params=32e6,
# num_gpus_per_node=8, num_nodes=1): per CPU, per GPU, offload_param, offload_optimizer, zero_init.
ZERO3_ROWS = [
    ("71.69", "0.12", True, True, True),
    ("127.45", "0.12", True, True, False),
    ("63.72", "0.78", False, True, True),
    ("127.45", "0.78", False, True, False),
    ("1.43", "6.09", False, False, True),
    ("127.45", "6.09", False, False, False),
]


@pytest.mark.parametrize("cpu,gpu,params_off,optim_off,zero_init", ZERO3_ROWS)
def test_zero3_cold_example_3b_on_8_gpus(cpu, gpu, params_off, optim_off, zero_init):
    est = zero3_estimate(2851e6, 32e6, 8, 1, cpu_offload=optim_off,
                         cpu_offload_params=params_off, zero_init=zero_init)
    assert (gib(est.cpu_bytes), gib(est.gpu_bytes)) == (cpu, gpu)


def test_zero3_case_formulas():
    # memory.rst, "GPU RAM", ZeRO-3: case 1 largest_layer_memory + 18 * params / total GPUs,
    # case 2 largest_layer_memory, case 3 largest_layer_memory + 2 * params / total GPUs,
    # with largest_layer_memory = 4 * largest_layer_params.
    params, largest, gpus = 737_670_000, 32_900_000, 4
    assert zero3_estimate(params, largest, gpus, 1, False, False).gpu_bytes == \
        4 * largest + int(18 * params / gpus)
    assert zero3_estimate(params, largest, gpus, 1, True, True).gpu_bytes == 4 * largest
    assert zero3_estimate(params, largest, gpus, 1, True, False).gpu_bytes == \
        4 * largest + int(2 * params / gpus)


def test_cli_estimator_json(capsys):
    argv = ["--params", "2851e6", "--gpus", "8", "--zero", "3", "--offload", "optimizer",
            "--estimator", "deepspeed", "--largest-layer-params", "32e6", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert gib(out["estimator"]["cpu_bytes"]) == "63.72"
    assert gib(out["estimator"]["gpu_bytes"]) == "0.78"
    assert out["estimator"]["gpus_per_node"] == 8 and out["estimator"]["nodes"] == 1


def test_cli_estimator_needs_zero_2_or_3(capsys):
    assert main(["--params", "1e9", "--zero", "1", "--estimator", "deepspeed"]) == 2
    assert capsys.readouterr().err.startswith("hpgrem plan: error: ")
