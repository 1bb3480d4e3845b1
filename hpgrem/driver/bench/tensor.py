"""`hpgrem bench tensor`: training throughput (tokens/s) of examples/llm/small.toml on the
tensor back end beside the same model in PyTorch on CPU, on one PE against one PyTorch process,
and data parallel on 2 ranks (`mpiexec -n 2`) against PyTorch DDP (gloo) on 2 processes;
then tensor parallel (tp = 2) and pipeline parallel (pp = 2, 1F1B over 4 micro-batches) on 2
ranks, with no PyTorch peer: PyTorch's own tensor parallelism (DTensor) and pipelining
(torch.distributed.pipelining) need the model written for them and a device mesh, so a peer
would measure other code, not the same model. Each layout also gives our peak memory per PE
(bytes of live tensors, the largest over the PEs, pam/tensor/memory.py); PyTorch on CPU has no
allocator statistics to set beside it.

Every measurement runs in a fresh process with one thread for numpy's BLAS and for PyTorch
(OMP, MKL, OpenBLAS and torch.set_num_threads(1)), so both sides use the same cores. The runs
alternate (ours, PyTorch, ours, PyTorch, ...), and each side reports its best step time over
all its runs (the first step of each run, which builds and warms up, excluded). The PyTorch
model is the same GPT-2 (pre-LayerNorm, tanh GELU, tied LM head, AdamW betas (0.9, 0.95), eps
1e-8, decay on the 2-D weights, global-norm clipping) written as PyTorch users write it
(scaled_dot_product_attention). Without PyTorch the peer columns are empty.

On one PE the table also gives tokens per CPU second of the process (its user and system
time): on a shared machine, where other work takes turns on the cores, that is what the code
itself costs, while wall time also counts the turns of the others.

Run as a module, it is one measurement: `python -m hpgrem.driver.bench.tensor ours|torch CONFIG STEPS
RANKS [dp|tp|pp]` prints {"tokens_per_s": ..., "tokens_per_cpu_s": ...} (ours also
"peak_bytes_per_pe") on rank 0 (under mpiexec, the layout's parallelism over the ranks, data
parallel by default).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import time

from benchmarks import HERE
SMALL = HERE.parent / "examples" / "llm" / "small.toml"
STEPS = 4  # steps per run: the first warms up, the best of the others counts
RUNS = 3  # alternated runs of each side
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def rows(opt: int) -> list:
    """The benchmark's rows (the level does not apply: no program is compiled)."""
    from hpgrem.driver.bench.row import Row
    have_torch = importlib.util.find_spec("torch") is not None
    if not have_torch:
        print("note: PyTorch is not installed (pip install torch==2.13.0): no peer for the tensor rows",
              file=sys.stderr)
    layouts = [("small@1", [], 1, "dp", "PyTorch")]
    mpiexec = shutil.which("mpiexec")
    if mpiexec is not None:
        layouts.append(("small@mpi2", [mpiexec, "-n", "2"], 2, "dp", "PyTorch DDP"))
        layouts += [(f"small@{kind}2", [mpiexec, "-n", "2"], 2, kind, None) for kind in ("tp", "pp")]
    found = []
    for name, launcher, ranks, kind, peer in layouts:
        ours, theirs = _alternated(launcher, have_torch and peer is not None, ranks, kind)
        # one process's CPU time says what the code costs on a shared machine; for ranks > 1
        # (rank 0's CPU time) it leaves out the waiting, so only wall time is shown there
        for metric in ("tokens_per_s", "tokens_per_cpu_s") if ranks == 1 else ("tokens_per_s",):
            unit = "tokens/s" if metric == "tokens_per_s" else "tokens/cpu-s"
            found.append(Row(name, metric, ours[metric], unit, peer if theirs else None,
                             theirs[metric] if theirs else None))
        found.append(Row(name, "peak_bytes_per_pe", ours["peak_bytes_per_pe"], "bytes"))
    return found


def _alternated(launcher: list[str], with_torch: bool, ranks: int, kind: str = "dp") -> tuple[dict, dict | None]:
    """Best rates of ours and of PyTorch over RUNS alternated runs (PyTorch's None: not
    installed, no peer for this layout, or a run of it failed, which is reported)."""
    ours: dict[str, float] = {}
    peer: dict[str, float] | None = {} if with_torch else None
    for _ in range(RUNS):
        _keep_best(ours, _measure(launcher, "ours", ranks, kind))
        if peer is not None:
            try:
                _keep_best(peer, _measure(launcher, "torch", ranks))
            except RuntimeError as e:
                print(f"note: the PyTorch peer failed, its column is empty: {e}", file=sys.stderr)
                peer = None
    return ours, peer


def _keep_best(best: dict[str, float], rates: dict[str, float]) -> None:
    for metric, value in rates.items():
        best[metric] = max(best.get(metric, 0.0), value)


def _measure(launcher: list[str], side: str, ranks: int, kind: str = "dp") -> dict[str, float]:
    env = {**os.environ, **ONE_THREAD, "MASTER_PORT": str(_free_port())}
    command = [*launcher, sys.executable, "-m", "hpgrem.driver.bench.tensor", side, str(SMALL), str(STEPS), str(ranks), kind]
    r = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=HERE.parent)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _free_port() -> int:
    """A TCP port free now, for the DDP processes' rendezvous."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _best_rates(step, steps: int, tokens: int) -> dict[str, float]:
    """Run `step` `steps` times; the best tokens per wall second and per CPU second of this
    process over the steps after the first (which warms up)."""
    wall, cpu = math.inf, math.inf
    for k in range(steps):
        began, began_cpu = time.perf_counter(), time.process_time()
        step()
        if k:
            wall = min(wall, time.perf_counter() - began)
            cpu = min(cpu, time.process_time() - began_cpu)
    return {"tokens_per_s": tokens / wall, "tokens_per_cpu_s": tokens / cpu}


PIPELINE_MICRO_BATCHES = 4
"""Micro-batches of the pp rows (1F1B): with one, a pipeline has nothing to overlap."""


def _ours(config_path: str, steps: int, ranks: int, kind: str = "dp") -> dict[str, float]:
    """Best rates of a step on the tensor back end (under mpiexec, `kind` parallelism over its
    ranks), and the largest peak of live tensor bytes of a PE in the last step."""
    from backend.tensor.config import load_config
    from backend.tensor.train import Trainer
    from hpgrem.driver.args import mpi_comm
    from pam.tensor.kernels import retain_freed_memory
    retain_freed_memory()  # as `hpgrem train` does (a process of its own: run by the bench)
    overrides = {("train", "steps"): steps, ("parallel", kind): ranks}
    if kind == "pp":
        overrides[("train", "micro_batches")] = PIPELINE_MICRO_BATCHES
    config = load_config(config_path, overrides)
    trainer = Trainer(config, comm=mpi_comm())
    stats = []

    def step() -> None:
        stats[:] = [trainer.step()[1]]
    try:
        rates = _best_rates(step, steps, config.tokens_per_step)
    finally:
        trainer.close()
    rates["peak_bytes_per_pe"] = float(max(row.memory.get("peak_total", 0) for row in stats[0].per_pe))
    return rates


def _torch(config_path: str, steps: int, dp: int) -> dict[str, float]:
    """Best rates of a step of the same model in PyTorch (DDP over gloo when dp > 1)."""
    import torch
    from backend.tensor.config import load_config
    from backend.tensor.data import synthetic_batch
    torch.set_num_threads(1)
    config = load_config(config_path, {("train", "steps"): steps, ("parallel", "dp"): dp})
    m, t = config.model, config.train
    torch.manual_seed(t.seed)
    model = torch_gpt(m.n_layer, m.n_head, m.d_model, m.seq_len, m.vocab).to(getattr(torch, t.dtype))
    rank = 0
    if dp > 1:
        import torch.distributed as dist
        rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("gloo", rank=rank, world_size=dp)
        model = torch.nn.parallel.DistributedDataParallel(model)
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": t.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=t.lr, betas=(0.9, 0.95), eps=1e-8)
    share = t.batch // dp
    count = [0]

    def step() -> None:  # as Trainer.step: the batch drawn, then forward, backward, update
        count[0] += 1
        tokens, targets = synthetic_batch(count[0], t.batch, m.seq_len, m.vocab, t.seed)
        x = torch.from_numpy(tokens[rank * share:(rank + 1) * share])
        y = torch.from_numpy(targets[rank * share:(rank + 1) * share])
        loss = torch.nn.functional.cross_entropy(model(x).view(-1, m.vocab), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, t.clip)
        optimizer.step()
    try:
        return _best_rates(step, steps, config.tokens_per_step)
    finally:
        if dp > 1:
            torch.distributed.destroy_process_group()


def _torch_gpt_class():
    """The PyTorch GPT-2 class (defined on first use: torch is optional)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self, n_head: int, d: int):
            super().__init__()
            self.n_head = n_head
            self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
            self.c_attn, self.attn_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self, n_layer: int, n_head: int, d: int, seq_len: int, vocab: int):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq_len, d)
            self.h = nn.ModuleList(Block(n_head, d) for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(d, eps=1e-5)
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02 / (2 * n_layer) ** 0.5 if name.endswith("proj.weight") else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, tokens):
            x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
            for block in self.h:
                x = block(x)
            return self.ln_f(x) @ self.wte.weight.T  # the LM head tied to the token embedding

    return GPT


def torch_gpt(n_layer: int, n_head: int, d_model: int, seq_len: int, vocab: int):
    """The PyTorch model of the same shape."""
    return _torch_gpt_class()(n_layer, n_head, d_model, seq_len, vocab)


def main(argv: list[str]) -> int:
    side, config, steps, ranks = argv[0], argv[1], int(argv[2]), int(argv[3])
    kind = argv[4] if len(argv) > 4 else "dp"
    rates = _ours(config, steps, ranks, kind) if side == "ours" else _torch(config, steps, ranks)
    if int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))) == 0:
        print(json.dumps(rates), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
