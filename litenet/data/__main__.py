"""`python -m litenet.data`: the `litenet data` subcommand without the main dispatcher."""

import sys

from litenet.data.cli import main

sys.exit(main())
