"""The data-parallel tests find their helpers (parallel_fixtures) and the CUDA tests' emulator."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "cuda"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
