"""Settings for the whole test suite."""

import os

# Tests use tiny matrices: one BLAS thread is as fast, and it avoids the collapse that spinning
# OpenBLAS threads suffer when a 2-core machine is shared with other jobs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
