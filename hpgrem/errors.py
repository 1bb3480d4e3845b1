"""User errors: the bottom of the layers, so that every layer may raise them.

The command line (hpgrem/driver/cli.py) catches each and turns it into a message and an exit
status (spec/cli.md); anything else that escapes is a bug.
"""

# The exit statuses of spec/cli.md, the one table of them.
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_DEADLOCK, EXIT_LIMIT, EXIT_INTERNAL = 0, 1, 2, 3, 4, 70
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool whose reader went away


class UsageError(Exception):
    """A mistake on the command line or in a file that has no source position."""
