"""Training data for the tensor back end: the synthetic learnable task and byte-level text.

A batch is a pair (tokens, targets) of int64 arrays [batch, seq_len], targets being the tokens
shifted by one place (next-token prediction). Batches are pure functions of (seed, step), so a
test regenerates the batches of any step of any run, and every MPI rank draws the same global
batch (the data-parallel pass gives each rank its share).

The synthetic task (`synthetic_batch`): a fixed random permutation `succ` of the vocabulary,
drawn from the seed, is the rule. Each sequence starts at a uniform random token; each next
token is `succ[previous]` with probability 1 - noise, else a uniform random token. A model
that learns the rule predicts the next token with cross-entropy `synthetic_floor(vocab, noise)`
(0.73 nats for vocab 64 and noise 0.1), far below the log(vocab) of a model that knows nothing
(4.16 nats for vocab 64): the loss must fall well below its start.

Text (`TextData`): any UTF-8 file as its bytes (vocab 256). The last `HELD_OUT` of the bytes are
held out; training windows are drawn at random from the rest, and the held-out loss is measured
on fixed windows of the held-out part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpgrem.errors import UsageError
from hpgrem.files import read_bytes

NOISE = 0.1
"""Probability that a synthetic token breaks the rule (a uniform random token instead)."""
HELD_OUT = 0.1
"""Share of a text file's bytes held out for the held-out loss."""
BYTE_VOCAB = 256

_RULE, _BATCH, _TEXT = 0x5EED, 0xBA7C, 0x7E47  # streams of the seed: one per use


def successor_rule(vocab: int, seed: int) -> np.ndarray:
    """The synthetic task's rule: succ[t] is the token that usually follows t."""
    return np.random.default_rng([seed, _RULE]).permutation(vocab).astype(np.int64)


def synthetic_batch(step: int, batch: int, seq_len: int, vocab: int, seed: int,
                    noise: float = NOISE) -> tuple[np.ndarray, np.ndarray]:
    """The synthetic task's (tokens, targets) for `step` (any int >= 0), each int64 [batch, seq_len]."""
    succ = successor_rule(vocab, seed)
    rng = np.random.default_rng([seed, _BATCH, step])
    seq = np.empty((batch, seq_len + 1), dtype=np.int64)
    seq[:, 0] = rng.integers(0, vocab, batch)
    breaks = rng.random((batch, seq_len)) < noise
    random_tokens = rng.integers(0, vocab, (batch, seq_len))
    for t in range(seq_len):
        seq[:, t + 1] = np.where(breaks[:, t], random_tokens[:, t], succ[seq[:, t]])
    return seq[:, :-1].copy(), seq[:, 1:].copy()


def synthetic_floor(vocab: int, noise: float = NOISE) -> float:
    """The lowest expected cross-entropy on the synthetic task (nats per token): the entropy of
    the next token given the previous one, which the rule fixes but for the noise."""
    hit = 1 - noise + noise / vocab
    miss = noise / vocab
    return -(hit * math.log(hit) + (vocab - 1) * miss * math.log(miss)) if noise else 0.0


class DataError(UsageError):
    """A data file that cannot be used (exit status 2)."""


@dataclass(frozen=True, slots=True)
class TextData:
    """A UTF-8 text file as byte tokens: training windows and the held-out split."""

    path: str
    train: np.ndarray  # int64 byte values
    held_out: np.ndarray

    @classmethod
    def load(cls, path: str, seq_len: int) -> TextData:
        """Read and split `path`; DataError if it is missing, not UTF-8, or too short for two
        windows of seq_len + 1 bytes (one to train on, one held out)."""
        data = read_bytes(path, DataError, "data file", utf8=True)
        tokens = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
        cut = len(tokens) - max(seq_len + 1, int(len(tokens) * HELD_OUT))
        if cut < seq_len + 1:
            raise DataError(f"{path}: {len(tokens)} bytes is too short for seq_len {seq_len} "
                            f"(at least {2 * (seq_len + 1)} bytes: a window to train on and one held out)")
        return cls(path, tokens[:cut], tokens[cut:])

    def batch(self, step: int, batch: int, seq_len: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Training windows for `step`: `batch` random windows of the training part."""
        rng = np.random.default_rng([seed, _TEXT, step])
        starts = rng.integers(0, len(self.train) - seq_len, batch)
        return _windows(self.train, starts, seq_len)

    def held_out_batch(self, batch: int, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
        """`batch` fixed windows spread evenly over the held-out part (the same every time)."""
        starts = np.linspace(0, len(self.held_out) - seq_len - 1, batch).astype(np.int64)
        return _windows(self.held_out, starts, seq_len)


def _windows(tokens: np.ndarray, starts: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    index = starts[:, None] + np.arange(seq_len + 1)[None, :]
    seq = tokens[index]
    return seq[:, :-1].copy(), seq[:, 1:].copy()
