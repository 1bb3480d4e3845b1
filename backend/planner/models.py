"""GPT model shapes, the named presets, and their parameter counts.

The architecture is GPT-2's (spec/tensor.md): learned token and position embeddings, ``layers``
pre-LayerNorm blocks with a 4h MLP, a final LayerNorm, and an LM head tied to the token embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.planner.errors import PlanError


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """The shape of a GPT model; every count the planner needs follows from it."""

    name: str
    """A preset's name, or ``"custom"`` for a shape given on the command line."""
    layers: int
    """Transformer blocks, ``l`` (Narayanan et al.) or ``L`` (Korthikanti et al.)."""
    hidden: int
    """Hidden size ``h``."""
    heads: int
    """Attention heads ``a``."""
    vocab: int
    """Vocabulary size ``V`` (Megatron pads GPT-2's 50,257 to 51,200)."""
    seq: int
    """Sequence length ``s``."""

    @property
    def layer_params(self) -> int:
        """One block: QKV 3h²+3h, projection h²+h, MLP 8h²+5h, two LayerNorms 4h = 12h²+13h."""
        h = self.hidden
        return 12 * h * h + 13 * h

    @property
    def embedding_params(self) -> int:
        """Token (V·h) and position (s·h) embeddings; the output layer reuses the token matrix."""
        return (self.vocab + self.seq) * self.hidden

    @property
    def params(self) -> int:
        """Every parameter once: the blocks, the embeddings and the final LayerNorm (2h).

        Narayanan et al. 2021, Eq. 2 omits only the final LayerNorm (see ``narayanan_params``).
        """
        return self.layers * self.layer_params + self.embedding_params + 2 * self.hidden

    @property
    def largest_layer_params(self) -> int:
        """The largest single module, as DeepSpeed's ZeRO-3 estimator counts it.

        The token embedding (V·h) or the first MLP matrix with its bias (4h² + 4h).
        """
        h = self.hidden
        return max(self.vocab * h, 4 * h * h + 4 * h)


def narayanan_params(layers: int, hidden: int, vocab: int, seq: int) -> float:
    """Parameters by Narayanan et al. 2021, Eq. 2: P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h))."""
    l, h = layers, hidden
    return 12 * l * h * h * (1 + 13 / (12 * h) + (vocab + seq) / (12 * l * h))


def _preset(name: str, layers: int, hidden: int, heads: int, vocab: int, seq: int) -> ModelConfig:
    return ModelConfig(name, layers, hidden, heads, vocab, seq)


# GPT-2 (Radford et al. 2019): vocabulary 50,257, context 1,024.
# GPT-3 175B (Brown et al. 2020, Table 2.1) with Megatron's padded vocabulary 51,200, which is the
# 174.6B model of Narayanan et al. 2021, Table 2.
# The "megatron-*" sizes are the rows of Narayanan et al. 2021, Table 1 (V = 51,200, s = 2,048);
# "korthikanti-22b" is the 22B model of Korthikanti et al. 2022, Table 1 (its 175B, 530B and 1T
# models are gpt3-175b, megatron-529.6b and megatron-1t).
MODELS: dict[str, ModelConfig] = {
    m.name: m
    for m in (
        _preset("gpt2", 12, 768, 12, 50257, 1024),
        _preset("gpt2-medium", 24, 1024, 16, 50257, 1024),
        _preset("gpt2-large", 36, 1280, 20, 50257, 1024),
        _preset("gpt2-xl", 48, 1600, 25, 50257, 1024),
        _preset("gpt3-175b", 96, 12288, 96, 51200, 2048),
        _preset("korthikanti-22b", 48, 6144, 64, 51200, 2048),
        _preset("megatron-1.7b", 24, 2304, 24, 51200, 2048),
        _preset("megatron-3.6b", 30, 3072, 32, 51200, 2048),
        _preset("megatron-7.5b", 36, 4096, 32, 51200, 2048),
        _preset("megatron-18.4b", 40, 6144, 48, 51200, 2048),
        _preset("megatron-39.1b", 48, 8192, 64, 51200, 2048),
        _preset("megatron-76.1b", 60, 10240, 80, 51200, 2048),
        _preset("megatron-145.6b", 80, 12288, 96, 51200, 2048),
        _preset("megatron-310.1b", 96, 16384, 128, 51200, 2048),
        _preset("megatron-529.6b", 105, 20480, 128, 51200, 2048),
        _preset("megatron-1t", 128, 25600, 160, 51200, 2048),
    )
}

ALIASES: dict[str, str] = {
    "gpt2-small": "gpt2",
    "gpt3": "gpt3-175b",
    "mt-nlg-530b": "megatron-529.6b",
    "megatron-1008b": "megatron-1t",
}


def find_model(name: str) -> ModelConfig:
    """The preset called ``name`` (case-insensitive, aliases allowed), or a PlanError."""
    key = name.lower()
    key = ALIASES.get(key, key)
    if key not in MODELS:
        raise PlanError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    return MODELS[key]


def custom_model(layers: int, hidden: int, heads: int, vocab: int, seq: int) -> ModelConfig:
    """A shape from the command line, checked for the divisibility attention needs."""
    for flag, value in (("--layers", layers), ("--hidden", hidden), ("--heads", heads),
                        ("--vocab", vocab), ("--seq", seq)):
        if value <= 0:
            raise PlanError(f"{flag} must be positive, got {value}")
    if hidden % heads:
        raise PlanError(f"--hidden {hidden} is not divisible by --heads {heads}")
    return ModelConfig("custom", layers, hidden, heads, vocab, seq)
