"""The annotations PARLOG's rule compiler reads, by their owners' names (docs/passes.md lists
them). The machine imports no pass: these strings are the whole contract, and a note that is
absent or malformed (a `.hpg` file may hold anything) gives the plain shape."""

COST, EXPORTABLE = "granularity.cost", "granularity.exportable"  # always there: a machine analysis
SWITCH, SHARE = "index-rules.switch", "index-rules.share"
LOOP = "tail-loop.loop"
DEST = "dest-passing.dest"
ARITH_TASKS = "order-nodes.arith_tasks"
LIFT = "lift.lift"
SCHEDULE = "schedule.schedule"
FED = "flow.fed"
