"""User errors: the bottom of the layers, so that every layer may raise them.

The command line (hpgrem/driver/cli.py) catches each and turns it into a message and an exit
status (spec/cli.md); anything else that escapes is a bug.
"""


class UsageError(Exception):
    """A mistake on the command line or in a file that has no source position."""
