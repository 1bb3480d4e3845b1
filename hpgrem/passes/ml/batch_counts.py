"""ml-batch-counts: the call counter and the depth test of direct code out of the hot path.

Direct code (ML functions that call only known functions, pam/ml/codegen.py) recurses in
Python and counts every call as a reduction. Without this pass each call adds one to the
counter on entry and compares its depth with the limit. With it (the module fact
`ml-batch-counts.calls` = "block"), the code generator counts the direct calls of each block
of straight-line code once, at the block's start (`calls[0] += 2` for fib's two recursive
calls; a leaf counts nothing), and the depth travels as a countdown. A block that could be
rerun as a fresh call tests it once at its start (at zero the function moves to a heap stack);
any other (inside a `try`, after a call or an effect) picks the callee per call, `(f_d if d
else f_n)(d - 1, ...)`, where `f_n`, which every direct function has, runs the call on a heap
stack as before (issue 15: only functions with a depth-bounded copy had one, so deeper than
200 frames the others ended in NameError).
The banked count is still checked every 16,384 calls, so --timeout, --max-steps and deep
recursion hold as before.

Counter effect: the same reductions. An ML exception that leaves a block before all its
calls are made takes back those not made: each counted call is marked in the source, and the
`except` of the function (or of a handler's `try`) subtracts the calls that end after the
instruction the exception left at (`unrun`, pam/ml/loader.py); Python's `try` costs nothing
until something raises.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem import ir
from hpgrem.passes import annotated


@dataclass(frozen=True)
class MLBatchCounts:
    name: str = "ml-batch-counts"
    dialects: tuple[str, ...] = ("ml",)
    records: tuple[str, ...] = ("calls",)

    def apply(self, module: ir.Module) -> ir.Module:
        return annotated(module, self, {ir.MODULE_FACTS: {"calls": "block"}})
