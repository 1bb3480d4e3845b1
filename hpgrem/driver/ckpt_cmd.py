"""`hpgrem ckpt gather DIR -o model.safetensors` (docs/tensor.md, "Checkpoints and faults").

DIR is a checkpoint folder (step-NNNNNNNN, with its manifest) or the folder of a run's
checkpoints, of which the newest complete one is taken. The output is one .safetensors file of
the parameters with the names and weight layout of GPT-2's own file: "wte.weight",
"wpe.weight", "h.{i}.ln_1.weight", "h.{i}.attn.c_attn.weight" [C, 3C] as Conv1D ([in, out]),
..., "ln_f.weight"; the LM head is the tied token embedding, so it has no tensor of its own.
transformers' GPT2LMHeadModel.from_pretrained reads it. Optimizer states are left out.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from hpgrem.driver.args import ArgumentParser
from hpgrem.driver.outputs import check_output, write_output
from hpgrem.errors import UsageError

_RENAMED = {"wte": "wte.weight", "wpe": "wpe.weight"}


def ckpt_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="hpgrem ckpt", description="Work with the checkpoints of hpgrem train.")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=ArgumentParser)
    gather = sub.add_parser("gather", help="one .safetensors file with GPT-2's names and layout")
    gather.add_argument("dir", metavar="DIR", help="a checkpoint (step-NNNNNNNN) or a folder of checkpoints "
                        "(the newest complete one is taken)")
    gather.add_argument("-o", dest="output", required=True, metavar="OUT.safetensors")
    return p


def gpt2_tensors(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The parameters among a checkpoint's `values`, by the names of GPT-2's own file."""
    return {_RENAMED.get(name, name): np.ascontiguousarray(value) for name, value in values.items()
            if not name.startswith(("m.", "v."))}


def cmd_ckpt(argv: list[str]) -> int:
    """`hpgrem ckpt gather`."""
    from backend.tensor.checkpoint import MANIFEST, Invalid, latest, read_checkpoint
    args = ckpt_parser().parse_args(argv)
    try:
        from safetensors.numpy import save
    except ImportError:
        raise UsageError("hpgrem ckpt gather needs safetensors: pip install 'hpgrem[checkpoint]'") from None
    if not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir}: no such folder")
    check_output(args.output)
    if os.path.exists(os.path.join(args.dir, MANIFEST)):
        try:
            found = read_checkpoint(args.dir)
        except Invalid as e:
            raise UsageError(f"{args.dir}: not a usable checkpoint: {e}") from None
    else:
        found = latest(args.dir)
        if found is None:
            raise UsageError(f"{args.dir}: no complete checkpoint")
    write_output(args.output, save(gpt2_tensors(found.values), metadata={"format": "pt"}))
    return 0
