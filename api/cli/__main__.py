"""``python -m api.cli``: the same command line as the ``accessgate`` script."""

import sys

from api.cli.main import main

sys.exit(main())
