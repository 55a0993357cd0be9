"""The CPU backend: ONNX Runtime on model.onnx (fp32) or model.int8.onnx (QDQ int8) — the Raspberry Pi path."""

from __future__ import annotations

import os
from pathlib import Path

from litenet.errors import LiteNetError
from litenet.runtime.backends import Backend
from litenet.runtime.images import pixels_to_float
from litenet.runtime.model_files import MODEL_HINT, ModelFiles, not_an_onnx_model, onnx_metadata, parse_names
from litenet.runtime.onnx_external import check_external_data

# Batches up to this size run on one intra-op thread: a batch-1 LiteNet forward is a few
# matrix-vector products of ~0.1 ms, too short for a second thread to pay for waking it
# (bench/results/cpu-inference.md measures both).
SMALL_BATCH = 8


def physical_cores() -> int:
    """Physical cores this process may run on (SMT siblings counted once), as ONNX Runtime's default."""
    try:
        allowed = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    # NOTE: read /proc/cpuinfo, not /sys: under qemu user emulation (scripts/arm-check.sh) /sys is
    # not mounted. ARM cpuinfo has no "core id" lines, and ARM cores have no SMT.
    try:
        blocks = Path("/proc/cpuinfo").read_text().split("\n\n")
    except OSError:
        return len(allowed)
    cores = set()
    for block in blocks:
        fields = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in block.splitlines()))
        if "processor" not in fields or not fields["processor"].isdigit():
            continue
        if "core id" not in fields:
            return len(allowed)
        if int(fields["processor"]) in allowed:
            cores.add((fields.get("physical id"), fields["core id"]))
    return len(cores) or len(allowed)


class OnnxRuntimeInference(Backend):
    """ONNX Runtime's CPU provider; one session per process."""

    name = "onnxruntime"

    @classmethod
    def unavailable_reason(cls, model: ModelFiles, precision: str) -> str | None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return "the onnxruntime package is not installed (pip install onnxruntime)"
        if _onnx_path(model, precision) is None:
            want = "model.onnx" if precision == "fp32" else "model.int8.onnx"
            return f"{model.describe()} has no {want}"
        return None

    def __init__(self, model: ModelFiles, precision: str, threads: int | None = None,
                 max_batch: int | None = None, spinning: bool = False, **_options):
        """Open the session. `threads` defaults to 1 when no batch exceeds SMALL_BATCH, else the physical cores."""
        import onnxruntime as ort

        path = _onnx_path(model, precision)
        if path is None:
            raise LiteNetError(f"{model.describe()} has no {'model.onnx' if precision == 'fp32' else 'model.int8.onnx'}; "
                               f"run `litenet export --int8` for it or {MODEL_HINT}")
        if threads is None:
            threads = 1 if max_batch is not None and max_batch <= SMALL_BATCH else physical_cores()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL  # one chain of nodes: nothing to overlap
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # int8 needs its QDQ fusions
        options.log_severity_level = 3
        # Spinning workers burn a core between calls; on a shared or small machine that slows the
        # caller more than the wake-up it saves (docs/export.md point 5; measured in the bench).
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        check_external_data(path)  # before ONNX Runtime may follow a location out of the folder
        try:
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/InvalidProtobuf/... types
            raise not_an_onnx_model(path, exc) from None
        self.path, self.precision, self.threads = path, precision, threads
        self._quiet = ort.RunOptions()
        self._quiet.log_severity_level = 4  # a failed run is raised, then reported in one line: no log as well
        self.input_name = self._check_signature()
        model.check_same_weights(onnx_metadata(path, self.session), path)
        self.classes = model.classes or _class_names(onnx_metadata(path, self.session))
        outputs = self.session.get_outputs()[0].shape[-1]
        if not self.classes and isinstance(outputs, int):
            self.classes = tuple(f"class {i}" for i in range(outputs))
        if isinstance(outputs, int) and outputs != len(self.classes):
            raise LiteNetError(f"{path} has {outputs} outputs but its config names {len(self.classes)} classes; "
                               "the model file and config.json come from different models")

    def _check_signature(self) -> str:
        """The input name, after checking that this is a LiteNet-shaped model (float (N, 32, 32, 3) → (N, C))."""
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        shape = inputs[0].shape if len(inputs) == 1 else None
        if (shape is None or len(outputs) != 1 or inputs[0].type != "tensor(float)" or len(shape) != 4
                or list(shape[1:]) != [32, 32, 3] or len(outputs[0].shape) != 2):
            raise LiteNetError(f"{self.path}: not a LiteNet model (it takes {[(i.name, i.shape) for i in inputs]}, "
                               f"expected one float input of shape (N, 32, 32, 3)); {MODEL_HINT}")
        return inputs[0].name

    def predict(self, images):
        """uint8 (N, 32, 32, 3) → float32 logits (N, C); a model that fails inside ONNX Runtime is a LiteNetError."""
        try:
            return self.session.run(None, {self.input_name: pixels_to_float(images)}, self._quiet)[0]
        except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/RuntimeException/InvalidArgument types
            if isinstance(exc, MemoryError):
                raise
            first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0][:200]
            raise LiteNetError(f"{self.path}: ONNX Runtime failed to run this model ({first}); re-export it with "
                               "`litenet export`, or use another --backend") from None

    def describe(self) -> str:
        return f"ONNX Runtime {_ort_version()} CPU, {self.threads} intra-op thread(s), {self.path}"


def _onnx_path(model: ModelFiles, precision: str) -> Path | None:
    return model.fp32_onnx if precision == "fp32" else model.int8_onnx


def _class_names(meta: dict[str, str]) -> tuple[str, ...]:
    return parse_names(meta.get("class_names"))


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__
