"""`python -m portkit.verify MODEL_DIR ...`: the same command as `portkit verify`."""

from portkit.verify.cli import main

raise SystemExit(main())
