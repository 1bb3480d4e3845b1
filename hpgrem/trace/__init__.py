"""Rewrite traces: the event stream (docs/trace.md) and its renderings."""
