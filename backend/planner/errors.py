"""The one exception a planner user can cause."""


class PlanError(ValueError):
    """A request the planner cannot answer: an unknown name or an inconsistent layout.

    The CLI prints it as ``error: MESSAGE`` and exits with status 2 (spec/cli.md).
    """
