"""``python -m synthenv`` runs the command line."""

import sys

from synthenv.cli import main

sys.exit(main())
