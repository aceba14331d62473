"""``python -m bench.slack``: the Slack bot benchmark."""

import sys

from bench.slack.run import main

sys.exit(main())
