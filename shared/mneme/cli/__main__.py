"""`python -m mneme.cli …` is `mneme …`."""

import sys

from mneme.cli.app import main

sys.exit(main())
