"""Run inside the arm64 root: which kernels ONNX Runtime runs for the int8 model (from its profile; no onnx package)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter

import numpy as np
import onnxruntime as ort


def main(path: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "probe")
        options.log_severity_level = 3
        options.intra_op_num_threads = 1  # the fake Pi has 4 cores, the host 2: pinning a 4th thread fails
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        session.run(None, {session.get_inputs()[0].name: np.zeros((1, 32, 32, 3), np.float32)})
        with open(session.end_profiling(), encoding="utf-8") as f:
            events = json.load(f)
    ops = Counter(e["args"]["op_name"] for e in events
                  if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"))
    print(f"ONNX Runtime {ort.__version__}; int8 model runs " + ", ".join(f"{n} × {k}" for k, n in sorted(ops.items())))


if __name__ == "__main__":
    main(sys.argv[1])
