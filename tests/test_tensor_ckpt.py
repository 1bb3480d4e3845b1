"""Checkpoints and faults (docs/tensor.md, "Checkpoints and faults"): atomic writes, the
manifest as untrusted input, corrupt and truncated shards skipped, resume bit-identical (one PE,
dp = 2, and under another layout), asynchronous writes holding the values of their step, the
gathered GPT-2 file read by transformers, a simulated PE's failure recovered from peer copies,
and a rank killed under mpiexec."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import ROOT

from backend.tensor import checkpoint
from backend.tensor.checkpoint import (MANIFEST, CheckpointError, Invalid, Writer, latest, read_checkpoint,
                                       step_dir)
from backend.tensor.config import ConfigError, config_from_table, load_config
from backend.tensor.train import RunOptions, Trainer, train
from hpgrem.driver.cli import main

TINY = str(ROOT / "examples" / "llm" / "tiny.toml")
MPIEXEC = shutil.which("mpiexec")
META = {"seed": 0, "data": None, "dtype": "float32", "layout": {"dp": 2, "tp": 1, "pp": 1, "zero": 0},
        "model": {"n_layer": 1, "n_head": 1, "d_model": 4, "seq_len": 2, "vocab": 3}}


def config(root, steps: int, *, dp: int = 1, tp: int = 1, pp: int = 1, zero: int = 0, every: int = 0,
           write: str = "sync", peer_copy: str = "none", dtype: str = "float64"):
    """The tiny model in float64, under a layout."""
    return config_from_table({"train": {"steps": steps, "dtype": dtype, "batch": 4},
                              "parallel": {"dp": dp, "tp": tp, "pp": pp, "zero": zero},
                              "checkpoint": {"dir": str(root), "every": every, "keep": 2, "write": write,
                                             "peer_copy": peer_copy}}, "test")


def states(value: float) -> dict[int, dict[str, np.ndarray]]:
    """Two ranks' (replicated) state of three small tensors."""
    whole = {"wte": np.full((3, 4), value, np.float32), "wpe": np.arange(8, dtype=np.float32).reshape(2, 4) + value,
             "m.wte": np.zeros((3, 4), np.float32)}
    return {0: whole, 1: whole}


def same(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)


# -- writing ---------------------------------------------------------------------------------


def test_each_rank_writes_its_shard_and_the_manifest_names_every_file_with_its_checksum(tmp_path):
    Writer(str(tmp_path), keep=2, ranks=2, meta=META).save(3, states(1.0))
    folder = step_dir(str(tmp_path), 3)
    assert sorted(os.listdir(folder)) == [MANIFEST, "rank-00000.npz", "rank-00001.npz"]
    body = json.loads(open(os.path.join(folder, MANIFEST)).read())
    assert body["step"] == 3 and body["layout"]["dp"] == 2
    assert {t["file"] for t in body["tensors"].values()} == {"rank-00000.npz", "rank-00001.npz"}
    assert body["tensors"]["wpe"] == {"shape": [2, 4], "dtype": "float32", "file": "rank-00001.npz"}
    assert same(read_checkpoint(folder).values, states(1.0)[0])


def test_keep_removes_older_checkpoints_only_once_the_new_one_is_complete(tmp_path):
    w = Writer(str(tmp_path), keep=2, ranks=2, meta=META)
    for step in (1, 2, 3):
        w.save(step, states(step))
    assert sorted(os.listdir(tmp_path)) == ["step-00000002", "step-00000003"]


@pytest.mark.parametrize("crashing", ["rank-00001.npz", MANIFEST])
def test_a_crash_between_temporary_file_and_rename_leaves_the_previous_checkpoint_complete(
        tmp_path, monkeypatch, crashing):
    w = Writer(str(tmp_path), keep=1, ranks=2, meta=META)
    w.save(1, states(1.0))
    rename = os.replace

    def crash(source, target):
        if os.path.basename(target) == crashing:
            raise OSError(5, "Input/output error")
        rename(source, target)
    monkeypatch.setattr(checkpoint.os, "replace", crash)
    with pytest.raises(CheckpointError, match="step-00000002: cannot write the checkpoint"):
        w.save(2, states(2.0))
    monkeypatch.undo()
    found = latest(str(tmp_path), report=lambda text: None)
    assert found.manifest.step == 1 and same(found.values, states(1.0)[0])
    left = os.listdir(step_dir(str(tmp_path), 2))
    assert MANIFEST not in left and not [f for f in left if f.endswith(".tmp")]  # no temporary left behind


# -- reading untrusted checkpoints -----------------------------------------------------------


def _edit_manifest(folder: str, edit) -> None:
    path = os.path.join(folder, MANIFEST)
    body = json.loads(open(path).read())
    edit(body)
    with open(path, "w") as f:
        f.write(json.dumps(body))


def _sha(body):
    return next(iter(body["files"].values()))


@pytest.mark.parametrize("edit, why", [
    (lambda b: b["files"].update({"../../etc/passwd": _sha(b)}), "not a shard's"),
    (lambda b: b["files"].update({"/etc/passwd": _sha(b)}), "not a shard's"),
    (lambda b: b["tensors"]["wte"].update(file="rank-00009.npz"), "not among the manifest's files"),
    (lambda b: b["tensors"]["wte"].update(shape=[-3, 4]), "a size must be an integer >= 0"),
    (lambda b: b["tensors"]["wte"].update(shape="3x4"), "shape must be a list"),
    (lambda b: b["tensors"]["wte"].update(shape=[4, 3]), "the manifest says float32[4, 3]"),
    (lambda b: b["tensors"]["wte"].update(dtype="object"), "dtype must be the checkpoint's float32"),
    (lambda b: b.update(step=True), "step must be an integer"),
    (lambda b: b.update(dtype="int8"), "dtype must be one of float32, float64"),
    (lambda b: b.update(version=99), "version 99"),
    (lambda b: b["layout"].pop("tp"), "layout must hold exactly dp, tp, pp, zero"),
    (lambda b: b["files"]["rank-00000.npz"].update(sha256="0" * 63), "sha256 must be 64"),
    (lambda b: b["files"]["rank-00000.npz"].update(bytes=10), "has 11+ bytes, the manifest says 10"),
    (lambda b: b.update(tensors={}), "must be non-empty"),
])
def test_the_manifest_is_checked_as_untrusted_input(tmp_path, edit, why):
    Writer(str(tmp_path), keep=1, ranks=2, meta=META).save(1, states(1.0))
    folder = step_dir(str(tmp_path), 1)
    _edit_manifest(folder, edit)
    with pytest.raises(Invalid, match=why.replace("[", r"\[").replace("+", r"\+")):
        read_checkpoint(folder)


def test_a_manifest_that_is_not_json_or_a_shard_linked_outside_the_folder_is_refused(tmp_path):
    Writer(str(tmp_path), keep=1, ranks=2, meta=META).save(1, states(1.0))
    folder = step_dir(str(tmp_path), 1)
    outside = tmp_path / "elsewhere.npz"
    os.replace(os.path.join(folder, "rank-00000.npz"), outside)
    os.symlink(outside, os.path.join(folder, "rank-00000.npz"))
    with pytest.raises(Invalid, match="rank-00000.npz lies outside the checkpoint's folder"):
        read_checkpoint(folder)
    with open(os.path.join(folder, MANIFEST), "wb") as f:
        f.write(b"\xff{")
    with pytest.raises(Invalid, match="manifest.json is not JSON"):
        read_checkpoint(folder)


def _replace_shard(folder: str, name: str, data: bytes) -> None:
    """A shard file replaced, and the manifest made to agree with it (size and checksum): only
    the file's contents can then refuse it."""
    import hashlib
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)
    _edit_manifest(folder, lambda b: b["files"][name].update(bytes=len(data),
                                                             sha256=hashlib.sha256(data).hexdigest()))


def test_a_shard_whose_checksum_matches_is_still_read_with_care(tmp_path):
    import io
    import zipfile
    Writer(str(tmp_path), keep=1, ranks=2, meta=META).save(1, states(1.0))
    folder = step_dir(str(tmp_path), 1)
    compressed = io.BytesIO()
    np.savez_compressed(compressed, wte=np.zeros((3, 4), np.float32), **{"m.wte": np.zeros((3, 4), np.float32)})
    _replace_shard(folder, "rank-00000.npz", compressed.getvalue())
    with pytest.raises(Invalid, match="'wte' is compressed"):
        read_checkpoint(folder)
    huge = io.BytesIO()  # a header claiming 10^12 floats, over 16 bytes of data
    with zipfile.ZipFile(huge, "w") as z:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                      "shape": (1000000, 1000000)})
        z.writestr("wte.npy", header.getvalue() + bytes(16))
        z.writestr("m.wte.npy", b"")
    _replace_shard(folder, "rank-00000.npz", huge.getvalue())
    _edit_manifest(folder, lambda b: b["tensors"]["wte"].update(shape=[1000000, 1000000]))
    with pytest.raises(Invalid, match="'wte' claims more bytes than its file holds"):
        read_checkpoint(folder)
    with open(os.path.join(folder, MANIFEST), "w") as f:
        f.write("[" * 100000 + "]" * 100000)
    with pytest.raises(Invalid, match="nests too deeply|is not JSON"):
        read_checkpoint(folder)


@pytest.mark.parametrize("damage, why", [
    (lambda data: data[:len(data) // 2], "has .* bytes, the manifest says .* \\(truncated or changed\\)"),
    (lambda data: data[:100] + bytes([data[100] ^ 1]) + data[101:], "does not match its SHA-256 checksum"),
])
def test_a_truncated_or_corrupted_shard_is_detected_and_that_checkpoint_skipped(tmp_path, damage, why):
    w = Writer(str(tmp_path), keep=3, ranks=2, meta=META)
    w.save(1, states(1.0))
    w.save(2, states(2.0))
    shard = os.path.join(step_dir(str(tmp_path), 2), "rank-00001.npz")
    data = open(shard, "rb").read()
    with open(shard, "wb") as f:
        f.write(damage(data))
    said: list[str] = []
    found = latest(str(tmp_path), report=said.append)
    assert found.manifest.step == 1 and same(found.values, states(1.0)[0])
    assert len(said) == 1 and "step-00000002 skipped: rank-00001.npz" in said[0]
    assert __import__("re").search(why, said[0])


# -- resume ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dp", [1, 2])
def test_resume_ends_with_the_parameters_of_the_uninterrupted_run_bit_for_bit(tmp_path, dp, capsys):
    whole = train(config(tmp_path / "none", 4, dp=dp), report=False).params
    train(config(tmp_path, 3, dp=dp, every=2), report=False)  # checkpoints at step 2; "dies" after 3
    resumed = train(config(tmp_path, 4, dp=dp), RunOptions(resume=True), report=False)
    assert [r.step for r in resumed.records] == [3, 4]
    assert same(resumed.params, whole)
    assert "resumed from" in capsys.readouterr().err


def test_resume_under_zero_with_a_pipeline_is_bit_identical(tmp_path):
    layout = dict(dp=2, pp=2, zero=3)
    whole = train(config(tmp_path / "none", 4, **layout), report=False).params
    train(config(tmp_path, 3, every=2, **layout), report=False)  # checkpoints at step 2; "dies" after 3
    resumed = train(config(tmp_path, 4, **layout), RunOptions(resume=True), report=False)
    assert [r.step for r in resumed.records] == [3, 4]
    assert same(resumed.params, whole)


@pytest.mark.parametrize("saved, resumed", [((2, 1, 1, 0), (1, 1, 1, 0)), ((1, 1, 1, 0), (1, 2, 1, 0)),
                                            ((1, 2, 1, 0), (2, 1, 1, 1)), ((2, 1, 1, 3), (1, 2, 2, 0)),
                                            ((1, 1, 2, 0), (2, 2, 1, 0))])
def test_resume_under_another_layout_loads_the_same_state_and_trains_on(tmp_path, saved, resumed):
    """(dp, tp, pp, zero): the state a layout loads is the checkpoint's bit for bit; the steps
    after it agree with the uninterrupted run to float64's 1e-9 (the layouts sum in other orders)."""
    (dp, tp, pp, zero), (dp2, tp2, pp2, zero2) = saved, resumed
    whole = train(config(tmp_path / "none", 3, dp=dp, tp=tp, pp=pp, zero=zero), report=False).params
    train(config(tmp_path, 2, dp=dp, tp=tp, pp=pp, zero=zero, every=2), report=False)
    saved_values = latest(str(tmp_path)).values
    trainer = Trainer(config(tmp_path, 3, dp=dp2, tp=tp2, pp=pp2, zero=zero2), RunOptions(resume=True))
    try:
        assert same({**trainer.job.parameters(), **trainer.job.optimizer_states()}, saved_values)
        trainer.step()
        after = trainer.parameters()
    finally:
        trainer.close()
    for name, value in whole.items():
        assert np.abs(after[name] - value).max() <= 1e-9 * np.abs(value).max(), name


@pytest.mark.parametrize("saved, resumed", [((2, 1, 1, 0), "dp=1,tp=2"), ((1, 2, 1, 0), "tp=1,pp=2"),
                                            ((2, 1, 1, 3), "dp=1,tp=2,pp=2,zero=0"), ((1, 1, 2, 0), "pp=1,dp=2,zero=1"),
                                            ((2, 1, 2, 2), "zero=3"), ((2, 1, 1, 1), "pp=2,zero=2")])
def test_resume_under_another_layout_is_bit_identical_to_the_run_that_changed_layout_in_memory(
        tmp_path, saved, resumed):
    """The strong form: a run checkpointed at step 2 under L1 and resumed under L2 ends with the
    bits of the uninterrupted run that went on under L2 after step 2 (`--relayout`)."""
    dp, tp, pp, zero = saved
    layout = dict(dp=dp, tp=tp, pp=pp, zero=zero)
    switched = train(config(tmp_path / "a", 4, **layout), RunOptions(relayout=f"2:{resumed}"), report=False)
    assert [r.step for r in switched.records] == [1, 2, 3, 4]
    train(config(tmp_path / "ck", 3, every=2, **layout), report=False)  # checkpoints at 2; "dies" after 3
    to = {**layout, **{k: int(v) for k, v in (item.split("=") for item in resumed.split(","))}}
    again = train(config(tmp_path / "ck", 4, **to), RunOptions(resume=True), report=False)
    assert [r.step for r in again.records] == [3, 4]
    assert same(again.params, switched.params)
    assert [r.loss for r in again.records] == [r.loss for r in switched.records[2:]]


@pytest.mark.parametrize("text, why", [("x:dp=2", "expected STEP:KEY=VALUE"), ("2:", "expected STEP:KEY=VALUE"),
                                       ("2:dpp=2", "is not KEY=VALUE"), ("2:dp=two", "dp takes int"),
                                       ("2:dp=3", "not divisible by dp"), ("2:pp=3", "chunks need at least")])
def test_relayout_is_checked_before_the_run(tmp_path, text, why):
    with pytest.raises(ConfigError, match=why):
        Trainer(config(tmp_path, 4, dp=2), RunOptions(relayout=text, pes=2))


def test_resume_refuses_a_checkpoint_of_another_model_and_starts_afresh_without_one(tmp_path, capsys):
    train(config(tmp_path, 1, every=1), report=False)
    other = config_from_table({"model": {"n_layer": 3}, "checkpoint": {"dir": str(tmp_path)}}, "test")
    with pytest.raises(CheckpointError, match="was written by a run with model"):
        Trainer(other, RunOptions(resume=True))
    empty = train(config(tmp_path / "empty", 1), RunOptions(resume=True), report=False)
    assert [r.step for r in empty.records] == [1]
    assert "no complete checkpoint in" in capsys.readouterr().err


def test_an_asynchronous_checkpoint_holds_the_values_of_its_step_not_the_next_update(tmp_path):
    trainer = Trainer(config(tmp_path, 3, every=2, write="async"))
    release = threading.Event()
    trainer.checkpoints.writer.before_write = lambda step: release.wait(30)
    try:
        trainer.step()
        trainer.step()  # the checkpoint of step 2 begins; its writer waits
        at_2 = {k: v.copy() for k, v in {**trainer.parameters(), **trainer.job.optimizer_states()}.items()}
        trainer.step()  # step 3's optimizer update runs while the writer still holds step 2
        at_3 = {**trainer.parameters(), **trainer.job.optimizer_states()}
        assert not os.path.exists(os.path.join(step_dir(str(tmp_path), 2), MANIFEST))
        release.set()
    finally:
        release.set()
        trainer.close()
    saved = read_checkpoint(step_dir(str(tmp_path), 2)).values
    assert same(saved, at_2)
    assert all(not np.array_equal(saved[k], at_3[k]) for k in ("wte", "m.wte", "v.h.0.mlp.c_fc.weight"))


# -- the gathered GPT-2 file -----------------------------------------------------------------


def test_ckpt_gather_writes_gpt2s_names_and_layout(tmp_path, capsys):
    pytest.importorskip("safetensors", reason="hpgrem ckpt gather needs safetensors (pip install 'hpgrem[checkpoint]')")
    from safetensors.numpy import load_file
    train(config(tmp_path / "ck", 1, every=1), report=False)
    out = str(tmp_path / "model.safetensors")
    assert main(["ckpt", "gather", str(tmp_path / "ck"), "-o", out]) == 0
    tensors = load_file(out)
    saved = latest(str(tmp_path / "ck")).values
    assert set(tensors) == {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias",
                            *(k for k in saved if k.startswith("h."))}
    assert tensors["h.0.attn.c_attn.weight"].shape == (32, 96)  # Conv1D: [in, out]
    assert np.array_equal(tensors["wte.weight"], saved["wte"])
    assert main(["ckpt", "gather", str(tmp_path / "nothing"), "-o", out]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_transformers_gpt2_reads_the_gathered_file_and_computes_our_logits(tmp_path):
    pytest.importorskip("safetensors", reason="needs safetensors (pip install 'hpgrem[interop]')")
    pytest.importorskip("transformers", reason="needs transformers (pip install 'hpgrem[interop]')")
    torch = pytest.importorskip("torch", reason="transformers' GPT-2 runs on PyTorch")
    from transformers import GPT2Config, GPT2LMHeadModel

    from backend.tensor.data import synthetic_batch
    from backend.tensor.gpt import ModelShape, build_forward
    from pam.tensor.kernels import evaluate
    c = config(tmp_path / "ck", 2, every=2, dtype="float32")
    train(c, report=False)
    folder = tmp_path / "gpt2"
    folder.mkdir()
    assert main(["ckpt", "gather", str(tmp_path / "ck"), "-o", str(folder / "model.safetensors")]) == 0
    m = c.model
    GPT2Config(vocab_size=m.vocab, n_positions=m.seq_len, n_embd=m.d_model, n_layer=m.n_layer, n_head=m.n_head,
               activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True,
               resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None,
               eos_token_id=None).save_pretrained(folder)
    model = GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32).eval()
    tokens, targets = synthetic_batch(7, 4, m.seq_len, m.vocab, 1)
    with torch.no_grad():
        theirs = model(torch.tensor(tokens)).logits.numpy()
    forward = build_forward(ModelShape(m.n_layer, m.n_head, m.d_model, m.seq_len, m.vocab), 4, "float32")
    ours = evaluate(forward, {**latest(str(tmp_path / "ck")).values, "tokens": tokens, "targets": targets})["logits"]
    assert np.abs(theirs - ours).max() <= 1e-4


# -- faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize("peer_copy, every, source", [("step", 0, "peer copies of step 2"),
                                                      ("checkpoint", 2, "peer copies of step 2"),
                                                      ("none", 2, "disk checkpoint of step 2")])
def test_a_failed_simulated_pe_is_recovered_and_the_run_ends_as_the_uninterrupted_one(
        tmp_path, capsys, peer_copy, every, source):
    whole = train(config(tmp_path / "none", 4, dp=2), report=False).params
    run = train(config(tmp_path, 4, dp=2, every=every, peer_copy=peer_copy), RunOptions(fail_pe="1@3"),
                report=False)
    assert same(run.params, whole)
    said = capsys.readouterr().err
    assert f"PE 1 failed in step 3: recovered from the {source}" in said
    assert "virtual time lost (a restart from the disk checkpoint of step" in said


@pytest.mark.parametrize("layout", [{"tp": 2}, {"pp": 2}, {"dp": 2, "zero": 2}])
def test_peer_copies_recover_a_failed_pe_of_any_layout_bit_for_bit(tmp_path, layout):
    whole = train(config(tmp_path / "none", 3, **layout), report=False).params
    run = train(config(tmp_path, 3, peer_copy="step", **layout), RunOptions(fail_pe="1@2"), report=False)
    assert same(run.params, whole)


def test_peer_copies_every_step_lose_less_virtual_time_than_a_restart_from_disk(tmp_path):
    trainer = Trainer(config(tmp_path, 4, dp=2, every=3, peer_copy="step"), RunOptions(fail_pe="0@3"))
    try:
        while trainer.step_count < 4:
            trainer.step()
    finally:
        trainer.close()
    r = trainer.checkpoints.recovery
    assert r.source == "peer copies" and r.from_step == 2 and r.disk_step == 0
    assert 0 < r.lost_s < r.restart_s


def test_fail_pe_is_checked(tmp_path, capsys):
    assert main(["train", TINY, "--steps", "1", "--fail-pe", "1@x"]) == 2
    assert "expected K@STEP" in capsys.readouterr().err
    assert main(["train", TINY, "--steps", "1", "--dp", "2", "--fail-pe", "2@1"]) == 2
    assert "the run has PEs 0 to 1" in capsys.readouterr().err
    assert main(["train", TINY, "--steps", "1", "--dp", "2", "--fail-pe", "1@1"]) == 2
    assert "--fail-pe needs something to recover from" in capsys.readouterr().err


def _rank_pids(root_pid: int) -> dict[int, int]:
    """The MPI rank of every process under `root_pid` that has one (PMI_RANK), by rank; the
    first found wins, breadth first (the rank itself, not the sentinel that rank 0 starts)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    ranks: dict[int, int] = {}
    todo = [root_pid]
    while todo:
        pid = todo.pop(0)
        todo += children.get(pid, [])
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(b"PMI_RANK="):
                ranks.setdefault(int(item[9:]), pid)
    return ranks


def _mpi_train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "train", TINY, "--dp", "2",
                           "--n-layer", "1", *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_killed_rank_ends_every_rank_within_10_s_naming_it_and_resume_is_bit_identical(tmp_path):
    if MPIEXEC is None:
        pytest.fail("mpiexec is not installed")
    root = tmp_path / "ck"
    job = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "train", TINY,
                            "--dp", "2", "--n-layer", "1", "--steps", "10000", "--checkpoint-every", "1",
                            "--checkpoint-write", "async", "--checkpoint-dir", str(root)],
                           stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while latest(str(root), report=lambda text: None) is None and job.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        ranks = _rank_pids(job.pid)
        assert 1 in ranks, job.communicate(timeout=10)[1]
        os.kill(ranks[1], signal.SIGKILL)
        _, err = job.communicate(timeout=10)  # every rank gone within 10 s of the kill
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode != 0
    # The sentinel (pam/sentinel.py) names the rank; the signal where the kernel still shows it.
    assert f"hpgrem: error: rank 1 (pid {ranks[1]}) " in err and "mpiexec ends the job with it" in err
    step = latest(str(root), report=lambda text: None).manifest.step
    resumed = _mpi_train("--steps", str(step + 2), "--checkpoint-dir", str(root), "--resume",
                         "--save", str(tmp_path / "resumed.npz"))
    assert resumed.returncode == 0, resumed.stderr
    whole = _mpi_train("--steps", str(step + 2), "--save", str(tmp_path / "whole.npz"))
    assert whole.returncode == 0, whole.stderr
    with np.load(tmp_path / "resumed.npz") as a, np.load(tmp_path / "whole.npz") as b:
        assert same(dict(a), dict(b))
    # and under another layout: bit-identical to the uninterrupted run that changed to it there
    other = _mpi_train("--steps", str(step + 2), "--checkpoint-dir", str(root), "--resume", "--dp", "1", "--tp", "2",
                       "--save", str(tmp_path / "other.npz"))
    assert other.returncode == 0, other.stderr
    switched = _mpi_train("--steps", str(step + 2), "--relayout", f"{step}:dp=1,tp=2",
                          "--save", str(tmp_path / "switched.npz"))
    assert switched.returncode == 0, switched.stderr
    with np.load(tmp_path / "other.npz") as a, np.load(tmp_path / "switched.npz") as b:
        assert same(dict(a), dict(b))


def test_under_mpiexec_a_tp_checkpoint_resumes_under_pp_as_the_one_pe_run_trains(tmp_path):
    if MPIEXEC is None:
        pytest.fail("mpiexec is not installed")
    root = str(tmp_path / "ck")

    def mpi_train(*args: str) -> None:
        r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "train", TINY,
                            "--dtype", "float64", "--checkpoint-dir", root, *args],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert r.returncode == 0, r.stderr
    mpi_train("--tp", "2", "--steps", "2", "--checkpoint-every", "2", "--checkpoint-write", "async")
    mpi_train("--pp", "2", "--steps", "3", "--resume", "--save", str(tmp_path / "resumed.npz"))
    whole = train(load_config(TINY, {("train", "steps"): 3, ("train", "dtype"): "float64"}), report=False).params
    with np.load(tmp_path / "resumed.npz") as resumed:
        for name, value in whole.items():
            assert np.abs(resumed[name] - value).max() <= 1e-9 * np.abs(value).max(), name
