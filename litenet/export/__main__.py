"""`python -m litenet.export` runs `litenet export`."""

import sys

from litenet.export.cli import main

sys.exit(main())
