"""`python -m loadfleet.agent.cli`: the same as `loadfleet-agent`."""

import sys

from . import main

sys.exit(main())
