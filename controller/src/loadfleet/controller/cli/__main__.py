"""`python -m loadfleet.controller.cli`: the same as `loadfleet`."""

import sys

from . import main

sys.exit(main())
