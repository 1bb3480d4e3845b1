"""``python -m backend.planner ...`` runs ``hpgrem plan ...``."""

import sys

from backend.planner.cli import main

sys.exit(main(sys.argv[1:]))
