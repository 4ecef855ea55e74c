"""`python -m portkit` is `portkit`."""

import sys

from portkit.cli import main

sys.exit(main())
