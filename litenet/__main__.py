"""`python -m litenet` runs the same command line as the `litenet` script."""

import sys

from litenet.cli import main

sys.exit(main())
