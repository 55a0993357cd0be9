"""`python -m litenet.runtime` runs the same command line as the `litenet-infer` script."""

import sys

from litenet.runtime.cli import main

sys.exit(main())
