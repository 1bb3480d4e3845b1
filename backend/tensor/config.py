"""The training configuration (spec/tensor.md): a TOML file read with the standard library,
its keys overridden by command-line flags, checked whole before anything runs.

    [model]      n_layer n_head d_model seq_len vocab
    [train]      batch micro_batches steps lr warmup weight_decay clip seed dtype
    [parallel]   dp tp pp zero recompute offload schedule virtual_stages
    [checkpoint] dir every keep write peer_copy

Every key has a default (the tiny model of examples/llm/tiny.toml). Every layout key is taken;
a combination that cannot run (tp not dividing the heads, too few layers for the chunks, ...) is
refused with its reason.
A mistake is a ConfigError (a UsageError: one line, exit status 2), never a traceback; a TOML
syntax error is a diagnostic at FILE:LINE:COL quoting the line.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from dataclasses import dataclass, field, fields, make_dataclass, replace
from typing import Any

from backend.layout import OFFLOAD, PARALLEL_KEYS, RECOMPUTE, SCHEDULES, Layout
from hpgrem.errors import UsageError
from hpgrem.files import read_text

DTYPES = ("float32", "float64")
CHECKPOINT_WRITES = ("sync", "async")
PEER_COPIES = ("none", "checkpoint", "step")


class ConfigError(UsageError):
    """A mistake in the configuration or its overrides (exit status 2)."""


@dataclass(frozen=True, slots=True)
class ModelSection:
    """[model]: the GPT-2 shape."""

    n_layer: int = 2
    n_head: int = 2
    d_model: int = 32
    seq_len: int = 16
    vocab: int = 32


@dataclass(frozen=True, slots=True)
class TrainSection:
    """[train]: the optimisation. `batch` is the global batch in sequences (split over dp)."""

    batch: int = 8
    micro_batches: int = 1
    steps: int = 40
    lr: float = 3e-3
    warmup: int = 5
    weight_decay: float = 0.1
    clip: float = 1.0
    seed: int = 0
    dtype: str = "float32"


ParallelSection = make_dataclass(
    "ParallelSection", [(key, Layout.__dataclass_fields__[key].type, field(default=getattr(Layout(), key)))
                        for key in PARALLEL_KEYS], frozen=True, slots=True)
ParallelSection.__doc__ = """[parallel]: the layout (backend/layout.py: its fields); ranks = dp * tp * pp."""


@dataclass(frozen=True, slots=True)
class CheckpointSection:
    """[checkpoint]: sharded checkpoints (backend/tensor/checkpoint.py) every `every` steps
    (0: none), the `keep` newest kept; `write` "async" overlaps writing with the next steps;
    `peer_copy` keeps each rank's shard in a peer's memory too, "checkpoint" (at each
    checkpoint) or "step" (after every step), to recover a failed PE without the disk."""

    dir: str = "checkpoints"
    every: int = 0
    keep: int = 2
    write: str = "sync"
    peer_copy: str = "none"


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """The whole configuration, plus what only the command line sets."""

    model: ModelSection = field(default_factory=ModelSection)
    train: TrainSection = field(default_factory=TrainSection)
    parallel: ParallelSection = field(default_factory=ParallelSection)
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    source: str = "<defaults>"  # the file read, for messages

    @property
    def ranks(self) -> int:
        """The PEs the layout needs."""
        p = self.parallel
        return p.dp * p.tp * p.pp

    @property
    def tokens_per_step(self) -> int:
        return self.train.batch * self.model.seq_len


SECTIONS: dict[str, type] = {"model": ModelSection, "train": TrainSection,
                             "parallel": ParallelSection, "checkpoint": CheckpointSection}


def key_type(section: str, key: str) -> type:
    """The Python type of a key's value (int, float or str)."""
    return type(getattr(SECTIONS[section](), key))


def keys() -> list[tuple[str, str]]:
    """Every (section, key), in file order: the flags that override them are made from these."""
    return [(s, f.name) for s, cls in SECTIONS.items() for f in fields(cls)]


def flag_name(section: str, key: str) -> str:
    """The command-line flag overriding a key: `--steps`, `--n-layer`, `--checkpoint-dir`."""
    name = key if section != "checkpoint" else f"checkpoint_{key}"
    return "--" + name.replace("_", "-")


def load_config(path: str, overrides: dict[tuple[str, str], Any] | None = None) -> TrainConfig:
    """The configuration in the TOML file `path` with `overrides` ((section, key) -> value,
    from the flags) applied and the whole checked; ConfigError (TomlSyntaxError for a syntax
    error) on any mistake."""
    text = _read(path)
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _syntax_error(path, text, e) from None
    return config_from_table(table, path, overrides)


def config_from_table(table: dict[str, Any], source: str,
                      overrides: dict[tuple[str, str], Any] | None = None) -> TrainConfig:
    """The checked configuration of a parsed TOML table (see load_config)."""
    values: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    for section, body in table.items():
        if section not in SECTIONS:
            raise ConfigError(f"{source}: unknown section [{section}]{_suggest(section, SECTIONS)}")
        if not isinstance(body, dict):
            raise ConfigError(f"{source}: '{section}' must be a table: [{section}]")
        for key, value in body.items():
            values[section][key] = _checked(source, section, key, value)
    for (section, key), value in (overrides or {}).items():
        values[section][key] = _checked(source, section, key, value)
    config = TrainConfig(**{s: SECTIONS[s](**v) for s, v in values.items()}, source=source)
    check(config)
    return config


def _read(path: str) -> str:
    return read_text(path, ConfigError, "configuration file")


_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


class TomlSyntaxError(ConfigError):
    """The file is not valid TOML: `diagnostic` at FILE:LINE:COL, to render quoting `text`."""

    def __init__(self, diagnostic, text: str):
        super().__init__(f"{diagnostic.span}: {diagnostic.message}")
        self.diagnostic = diagnostic
        self.text = text


def _syntax_error(path: str, text: str, e: tomllib.TOMLDecodeError) -> ConfigError:
    """A TOML syntax error, at FILE:LINE:COL where tomllib says where."""
    from hpgrem.diagnostics import Diagnostic
    from hpgrem.ir import Span
    message = str(e)
    m = _AT.search(message)
    if m is None:  # tomllib gives no place
        return ConfigError(f"{path}: invalid TOML: {message}")
    span = Span(path, int(m.group(1)), int(m.group(2)))
    return TomlSyntaxError(Diagnostic(span, f"invalid TOML: {message[:m.start()]}"), text)


def _suggest(name: str, choices) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _checked(source: str, section: str, key: str, value: Any) -> Any:
    """`value` for [section] key, of the key's type; ConfigError naming the key otherwise."""
    known = [f.name for f in fields(SECTIONS[section])]
    if key not in known:
        elsewhere = [s for s, cls in SECTIONS.items() if key in (f.name for f in fields(cls))]
        hint = f" (it belongs in [{elsewhere[0]}])" if elsewhere else _suggest(key, known)
        raise ConfigError(f"{source}: unknown key '{key}' in [{section}]{hint}; "
                          f"[{section}] takes {', '.join(known)}")
    want = key_type(section, key)
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, want) or isinstance(value, bool):
        raise ConfigError(f"{source}: [{section}] {key} must be {_TYPE_NAMES[want]}, "
                          f"got {_toml_repr(value)}")
    return value


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string"}


def _toml_repr(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return repr(value)


def check(config: TrainConfig) -> None:
    """Ranges, divisibility and what part 1 supports; ConfigError on the first mistake."""
    src, m, t, p = config.source, config.model, config.train, config.parallel
    for section, key in keys():
        value = getattr(getattr(config, section), key)
        if isinstance(value, int) and value < _MINIMUM.get(key, 1):
            raise ConfigError(f"{src}: [{section}] {key} must be at least {_MINIMUM.get(key, 1)}, got {value}")
    for key in ("lr", "weight_decay", "clip"):
        if not math.isfinite(getattr(t, key)):
            raise ConfigError(f"{src}: [train] {key} must be a finite number, got {getattr(t, key)}")
    if not t.lr > 0:
        raise ConfigError(f"{src}: [train] lr must be positive, got {t.lr}")
    if not t.weight_decay >= 0:
        raise ConfigError(f"{src}: [train] weight_decay must be zero or positive, got {t.weight_decay}")
    if not t.clip >= 0:
        raise ConfigError(f"{src}: [train] clip must be zero (no clipping) or positive, got {t.clip}")
    for section, key, allowed in (("train", "dtype", DTYPES), ("parallel", "recompute", RECOMPUTE),
                                  ("parallel", "offload", OFFLOAD), ("parallel", "schedule", SCHEDULES),
                                  ("checkpoint", "write", CHECKPOINT_WRITES),
                                  ("checkpoint", "peer_copy", PEER_COPIES)):
        value = getattr(getattr(config, section), key)
        if value not in allowed:
            raise ConfigError(f"{src}: [{section}] {key} must be one of {', '.join(allowed)}, "
                              f"got \"{value}\"{_suggest(value, allowed)}")
    if m.d_model % m.n_head:
        raise ConfigError(f"{src}: [model] d_model = {m.d_model} is not divisible by n_head = {m.n_head}")
    if t.batch % (p.dp * t.micro_batches):
        raise ConfigError(f"{src}: [train] batch = {t.batch} is not divisible by dp * micro_batches "
                          f"= {p.dp} * {t.micro_batches} (each rank takes an equal share)")
    if p.zero > 3:
        raise ConfigError(f"{src}: [parallel] zero must be 0, 1, 2 or 3, got {p.zero}")
    if p.zero and p.dp == 1:
        raise ConfigError(f"{src}: [parallel] zero = {p.zero} shards over the data-parallel ranks: it needs dp > 1")
    if m.n_head % p.tp:
        raise ConfigError(f"{src}: [parallel] tp = {p.tp} does not divide n_head = {m.n_head} "
                          "(each tensor-parallel rank takes whole heads)")
    _check_pipeline(src, m, t, p)


def _check_pipeline(src: str, m, t, p) -> None:
    """What a pipeline needs: a layer per chunk, micro-batches in whole groups of pp for the
    interleaved schedule (ZeRO runs beside a pipeline: docs/tensor.md, "ZeRO with a pipeline")."""
    if m.n_layer < p.pp * p.virtual_stages:
        raise ConfigError(f"{src}: [parallel] pp * virtual_stages = {p.pp * p.virtual_stages} chunks need at least "
                          f"as many layers, n_layer = {m.n_layer}")
    if p.virtual_stages > 1 and t.micro_batches % p.pp:
        raise ConfigError(f"{src}: [parallel] virtual_stages = {p.virtual_stages} (interleaved) needs micro_batches "
                          f"divisible by pp = {p.pp}, got {t.micro_batches}")


_MINIMUM = {"n_layer": 1, "vocab": 2, "warmup": 0, "seed": 0, "zero": 0, "every": 0, "keep": 1}


def with_vocab(config: TrainConfig, vocab: int) -> TrainConfig:
    """The configuration for a data set of `vocab` tokens (a text file: its 256 byte values)."""
    return replace(config, model=replace(config.model, vocab=vocab))
