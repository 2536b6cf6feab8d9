"""`python -m toolhost_server.cli`: the `toolhost` command without its console script."""

import sys

from . import main

sys.exit(main())
