"""The benchmarks' programs, as data: PARLOG (`parlog/`), ML (`ml/`, with the CPython peers of the
micro-benchmarks), SWI-Prolog's versions (`prolog/`). `hpgrem bench` (hpgrem/driver/bench/) runs
them; nothing here imports the rest of the project."""

from pathlib import Path

HERE = Path(__file__).parent
