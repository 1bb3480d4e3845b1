"""The benchmark suite behind `hpgrem bench` (see suite.py); programs live beside it."""
