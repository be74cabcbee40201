"""``python -m dmh.cli``."""

import sys

from . import main

sys.exit(main())
