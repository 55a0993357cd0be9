"""`export_model`: a weights folder → fp32 ONNX, int8 calibration, QDQ ONNX, int8 plan and (where possible)
a TensorRT engine, all checked, then written next to the weights at once."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from litenet.atomic import atomic_path
from litenet.errors import EnvironmentProblem, LiteNetError, UsageError
from litenet.export import checks, evaluate, int8_plan, onnx_graph, qdq, refine, scales as sc, siblings, tensorrt
from litenet.export.calibrate import DEFAULT_PERCENTILE, METHODS, activations, calibration_images
from litenet.export.onnx_fp32 import INPUT_DOC, build_fp32
from litenet.export.siblings import FP32_FILE, INT8_FILE, SCALES_FILE
from litenet.limits import MAX_CALIB_BYTES, MAX_CALIB_IMAGES
from litenet.runtime import int8_plan as plan_runtime
from litenet.runtime.model_files import file_sha256
from litenet.weights import WEIGHTS_FILE, load_model
from litenet.paths import make_folder

PLAN_FILE = plan_runtime.PLAN_FILE
ONNX_FORMAT = "litenet-onnx/1"
DEFAULT_METHOD = "percentile"
DEFAULT_CALIB = 4096
COMPARE_IMAGES = 1000  # images for the fp32 ONNX ≡ NumPy check (the float64 twin makes it slow-ish)


@dataclass
class Artifact:
    """One file to write: its bytes and, for models, the test accuracy measured on it."""

    name: str
    data: bytes
    accuracy: float | None = None


@dataclass(frozen=True)
class ExportOptions:
    """What to export and how to calibrate (the CLI's flags)."""

    int8: bool = False
    calib: int = DEFAULT_CALIB  # training images for the histograms
    method: str = DEFAULT_METHOD
    percentile: float = DEFAULT_PERCENTILE
    scales_file: str | Path | None = None  # reuse an earlier calibration instead of running one
    seed: int = 0  # which training images the calibration draws
    engine: bool = True  # build a TensorRT engine where TensorRT and a GPU are usable
    weight_max: int = qdq.WEIGHT_MAX  # 64, or 127 for targets without ONNX Runtime on AVX2-only x86
    rounding: str = "gptq"  # how W_q is rounded: "gptq" (output-aware, on the calibration images) or "nearest"
    bias_correction: bool = True  # fold the int8 network's mean output error into the float biases


@dataclass
class ExportReport:
    """What an export produced and measured, for the CLI's table."""

    out: Path
    artifacts: list[Artifact]
    fp32_check: dict
    plan_check: dict | None = None
    kernels: dict | None = None
    scales: sc.Scales | None = None
    weights: qdq.Int8Weights | None = None
    engine_note: str = ""
    notes: list[str] = field(default_factory=list)


def validate(options: ExportOptions) -> None:
    """Refuse bad flags before any slow work."""
    if options.method not in METHODS:
        raise UsageError(f"unknown calibration method {options.method!r}; choose one of {', '.join(METHODS)}")
    if not 1 <= options.calib <= MAX_CALIB_IMAGES:
        raise UsageError(f"--calib must be 1 … {MAX_CALIB_IMAGES:,} images, got {options.calib}")
    if options.weight_max not in qdq.WEIGHT_MAX_CHOICES:
        raise UsageError(f"--weight-max must be one of {', '.join(map(str, qdq.WEIGHT_MAX_CHOICES))}")
    if options.rounding not in refine.ROUNDINGS:
        raise UsageError(f"--rounding must be one of {', '.join(refine.ROUNDINGS)}, got {options.rounding!r}")
    if not 0 < options.percentile <= 100:
        raise UsageError(f"--percentile must be in (0, 100], got {options.percentile}")
    if options.scales_file is not None and not Path(options.scales_file).is_file():
        raise LiteNetError(f"{options.scales_file}: no such scales file; drop --scales to calibrate afresh")


def check_calibration_memory(params, model, images: int, flag: str) -> None:
    """Refuse a calibration whose activations would not fit MAX_CALIB_BYTES, before computing any.

    Bias correction walks the fp32 and the int8 network side by side over every calibration image,
    holding about two live tensors of each per image: 4 × the largest MatMul input, in float32.
    """
    if images > MAX_CALIB_IMAGES:
        raise UsageError(f"{flag} asks for {images:,} calibration images; the limit is {MAX_CALIB_IMAGES:,}")
    largest = max(x.size for x in activations(params, model, np.zeros((1, 32, 32, 3), np.uint8)).values())
    need = images * 4 * largest * 4
    if need > MAX_CALIB_BYTES:
        most = MAX_CALIB_BYTES // (16 * largest)
        raise UsageError(f"{flag}: calibrating this model on {images:,} images would hold ~{need / 2**30:.1f} GiB "
                         f"of activations (limit {MAX_CALIB_BYTES / 2**30:.0f} GiB); use --calib {most:,} or fewer")


def check_writable(folder: Path) -> None:
    """Fail early, before minutes of work, when nothing can be written into `folder`."""
    try:
        make_folder(folder)
        fd, probe = tempfile.mkstemp(prefix=".litenet-export-probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = "not a folder" if folder.exists() and not folder.is_dir() else (exc.strerror or str(exc))
        raise EnvironmentProblem(f"cannot write to {folder} ({reason}); choose a writable folder with --out") from None


def write_all(folder: Path, artifacts: list[Artifact]) -> None:
    """Write every file to a temporary beside its target, then rename them all: a failure leaves none."""
    try:
        with contextlib.ExitStack() as stack:
            for artifact in artifacts:
                stack.enter_context(atomic_path(folder / artifact.name)).write_bytes(artifact.data)
    except OSError as exc:
        raise EnvironmentProblem(f"writing into {folder} failed ({exc.strerror or exc}); "
                           "nothing was replaced; free space or choose another --out") from None


def model_metadata(doc: dict, classes: list[str], weights_sha256: str) -> dict[str, object]:
    """metadata_props shared by both ONNX models (the plan carries weights_sha256 too): the runtime
    refuses an exported file whose weights file beside it has changed since (a later training run)."""
    return {"litenet_format": ONNX_FORMAT, "preset": str(doc.get("preset", "unknown")),
            "class_names": list(classes), "input": INPUT_DOC, "opset": onnx_graph.OPSET,
            "weights_sha256": weights_sha256}


def export_model(weights: str | Path, out: str | Path | None = None, options: ExportOptions = ExportOptions(),
                 data: str | None = None, maps: str | None = None, log=print) -> ExportReport:
    """Export the model in `weights`; every check runs before anything is written."""
    validate(options)
    params, model, _, doc = load_model(weights)
    folder = Path(out) if out is not None else Path(weights)
    created = not folder.exists()
    check_writable(folder)
    try:
        weights_sha256 = file_sha256(Path(weights) / WEIGHTS_FILE)  # the bytes load_model just read
        return _export(folder, params, model, doc, weights_sha256, options, data, maps, log)
    except BaseException:
        if created and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # a failed export leaves no trace, not even the folder it made
        raise


def _export(folder: Path, params, model, doc: dict, weights_sha256: str, options: ExportOptions, data, maps,
            log) -> ExportReport:
    """The body of export_model once the inputs are known to be sound."""
    from litenet.data import open_cifar10  # after the cheap checks: opening may convert the data set

    ds = open_cifar10(data=data, maps=maps, progress=False)
    test_images, test_labels = np.asarray(ds.test.images), np.asarray(ds.test.labels)
    meta = model_metadata(doc, list(ds.classes), weights_sha256)

    log("fp32 ONNX: building and checking")
    fp32 = build_fp32(params, model, meta)
    onnx_graph.check(fp32)
    z32 = evaluate.logits(evaluate.session(fp32), test_images)
    fp32_check = checks.fp32_agreement(z32[:COMPARE_IMAGES], params, model, test_images[:COMPARE_IMAGES])
    if fp32_check["max_abs_diff"] > fp32_check["tolerance"]:
        raise RuntimeError(f"fp32 ONNX disagrees with the NumPy forward: {fp32_check}")  # a bug, not a user error
    acc32 = evaluate.accuracy(z32, test_labels)
    onnx_graph.set_metadata(fp32, {"test_accuracy": round(acc32, 6)})
    artifacts = [Artifact(FP32_FILE, fp32.SerializeToString(), acc32)]
    report = ExportReport(folder, artifacts, fp32_check)
    if options.int8:
        export_int8(report, options, params, model, str(doc.get("preset", "unknown")), ds, meta, acc32, log)
    stale = siblings.stale_siblings(folder, {a.name for a in artifacts}, weights_sha256)
    write_all(folder, artifacts)
    if stale:  # another model's int8 files beside this model.onnx would be served as this model
        siblings.remove(folder, stale)
        report.notes.append(f"removed {', '.join(stale)}: exported from other weights than these "
                            "(add --int8 to export them for these weights)")
    return report


def export_int8(report: ExportReport, options: ExportOptions, params, model, preset: str, ds, meta: dict,
                acc32: float, log) -> None:
    """Calibrate (or reuse a scales file), build the QDQ model and the plan, check them, maybe build an engine."""
    test_images, test_labels = np.asarray(ds.test.images), np.asarray(ds.test.labels)
    if options.scales_file is not None:
        path = Path(options.scales_file)
        scales = sc.from_json(path.read_text(encoding="utf-8"), model, str(path))
        log(f"int8: reusing the {scales.method} scales in {path}")
        # The weights are chosen on the images that calibration used, so the same file gives the same model.
        count = int(scales.source.get("images", options.calib))
        check_calibration_memory(params, model, count, f"{path} (its calibration images)")
        images = calibration_images(ds.train.images, count, int(scales.source.get("seed", options.seed)))
    else:
        check_calibration_memory(params, model, options.calib, "--calib")
        images = calibration_images(ds.train.images, options.calib, options.seed)
        log(f"int8: calibrating ({options.method}) on {len(images)} training images (seed {options.seed})")
        scales = sc.calibrate(params, model, images, options.method, options.percentile,
                              source={"split": "train", "seed": options.seed, "sampling": "uniform without replacement"})
    log(f"int8: weights ({options.rounding} rounding"
        f"{', bias correction' if options.bias_correction else ''}) on the same {len(images)} images")
    weights = refine.int8_weights(params, model, scales, images, options.weight_max, options.rounding,
                                  options.bias_correction)
    qmodel = qdq.build_qdq(params, model, scales, meta, weights)
    onnx_graph.check(qmodel)
    z8 = evaluate.logits(evaluate.session(qmodel), test_images)
    acc8 = evaluate.accuracy(z8, test_labels)
    onnx_graph.set_metadata(qmodel, {"test_accuracy": round(acc8, 6), "fp32_test_accuracy": round(acc32, 6)})
    report.kernels = evaluate.kernel_report(qmodel)
    if report.kernels["float_matmuls_after_dq"]:
        report.notes.append("ONNX Runtime left MatMuls in float: " + ", ".join(report.kernels["float_matmuls_after_dq"]))

    tensors = int8_plan.plan_tensors(params, model, scales, weights)
    plan_meta = int8_plan.plan_metadata(model, scales, preset, list(ds.classes), weights,
                                        weights_sha256=meta["weights_sha256"])
    z_plan = plan_runtime.run_plan(plan_runtime.plan_from_tensors(tensors, plan_meta), test_images)
    acc_plan = evaluate.accuracy(z_plan, test_labels)
    report.plan_check = checks.plan_agreement(z_plan, z8)
    report.scales, report.weights = scales, weights
    plan_bytes = int8_plan.plan_bytes(tensors, {**plan_meta, "test_accuracy": str(round(acc_plan, 6))})
    qbytes = qmodel.SerializeToString()
    report.artifacts += [Artifact(INT8_FILE, qbytes, acc8),
                         Artifact(SCALES_FILE, sc.to_json(scales, model, preset).encode()),
                         Artifact(PLAN_FILE, plan_bytes, acc_plan)]
    reason = tensorrt.unavailable_reason() if options.engine else "--no-engine was given"
    if reason is None:
        log("TensorRT: building the int8 engine")
        engine_bytes, info = tensorrt.build_and_describe(qbytes, weights_sha256=meta["weights_sha256"])
        report.artifacts += [Artifact(tensorrt.ENGINE_FILE, engine_bytes),
                             Artifact(tensorrt.ENGINE_INFO_FILE, (json.dumps(info, indent=2) + "\n").encode())]
        report.engine_note = f"TensorRT engine: built with TensorRT {info['tensorrt_version']} for {info['gpu_name']}"
    else:
        report.engine_note = tensorrt.skip_message(reason)
