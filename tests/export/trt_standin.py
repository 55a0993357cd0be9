"""Stand-ins for TensorRT and CuPy: the TensorRT builder and loader are tested against them, as no
machine of this project has TensorRT.

FakeTensorRT is just enough of the `tensorrt` module for litenet.export.tensorrt.build_engine and
litenet.runtime.tensorrt_backend.TensorRTInference, recording what it was asked to do. Its "engine"
is the parsed ONNX model behind a header holding the builder's batch profile; deserializing one
opens it in ONNX Runtime, so an engine computes what the QDQ model it was built from computes.
FakeCupy is device memory as a dict from pointer to NumPy array, which the engine's execution
context reads and writes through the addresses it is given, as TensorRT does.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

ENGINE_MAGIC = b"FAKE-TRT-ENGINE\n"


def serialize(onnx_bytes: bytes, shapes: tuple) -> bytes:
    """A stand-in engine: the header (input name and batch profile), then the ONNX model."""
    name, lo, _, hi = shapes
    return ENGINE_MAGIC + json.dumps({"input": name, "min": lo[0], "max": hi[0]}).encode() + b"\n" + onnx_bytes


class CUDARuntimeError(RuntimeError):
    """What CuPy raises where there is no driver or no device (named like cupy's own)."""


class DeviceArray:
    """A device buffer: its shape, dtype and address; the values live in FakeCupy.memory."""

    def __init__(self, ptr: int, shape: tuple, dtype):
        self.data, self.shape, self.dtype = SimpleNamespace(ptr=ptr), tuple(shape), np.dtype(dtype)

    def __len__(self) -> int:
        return self.shape[0]


class FakeCupy:
    """Just enough of the `cupy` module for the TensorRT loader."""

    float32 = np.float32

    def __init__(self, compute_capability: str = "61", gpu: bool = True):
        self.memory: dict[int, np.ndarray] = {}
        self.synchronized = 0
        fake = self

        class Device:
            def __init__(self, index=0):
                if not gpu:
                    raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
                self.compute_capability = compute_capability

        class Stream:
            ptr = 0x5EED

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def synchronize(self):
                fake.synchronized += 1

        self.cuda = SimpleNamespace(Device=Device, Stream=Stream)

    def _alloc(self, values: np.ndarray) -> DeviceArray:
        ptr = 0x1000 * (len(self.memory) + 1)
        self.memory[ptr] = values
        return DeviceArray(ptr, values.shape, values.dtype)

    def asarray(self, host) -> DeviceArray:
        return self._alloc(np.array(host))

    def empty(self, shape, dtype) -> DeviceArray:
        return self._alloc(np.full(shape, np.nan, dtype))  # NaN: a buffer the engine never wrote shows

    def asnumpy(self, array: DeviceArray, stream=None) -> np.ndarray:
        return self.memory[array.data.ptr].copy()


class FakeTensorRT:
    """Just enough of the tensorrt module for build_engine and TensorRTInference, recording what it was asked to do."""

    class Logger:
        WARNING = "warning"

        def __init__(self, level):
            self.level = level

    NetworkDefinitionCreationFlag = SimpleNamespace(EXPLICIT_BATCH=0)
    BuilderFlag = SimpleNamespace(INT8="INT8")
    MemoryPoolType = SimpleNamespace(WORKSPACE="WORKSPACE")

    def __init__(self, version: str, parses: bool = True, builds: bool = True, gpu: FakeCupy | None = None,
                 executes: bool = True):
        self.__version__, self.parses, self.builds, self.executes = version, parses, builds, executes
        self.gpu = gpu  # whose memory the engine reads and writes
        self.calls: dict = {"flags": [], "shapes": None, "network_flags": None, "bindings": []}
        fake = self

        class Parser:
            num_errors = 0 if parses else 1

            def __init__(self, network, logger):
                pass

            def parse(self, data):
                fake.calls["parsed"] = data
                return fake.parses

            def get_error(self, i):
                return SimpleNamespace(desc=lambda: "Unsupported operator Foo")

        class Config:
            def set_flag(self, flag):
                fake.calls["flags"].append(flag)

            def set_memory_pool_limit(self, pool, size):
                fake.calls["workspace"] = size

            def add_optimization_profile(self, profile):
                fake.calls["profiles"] = fake.calls.get("profiles", 0) + 1

        class Profile:
            def set_shape(self, name, lo, opt, hi):
                fake.calls["shapes"] = (name, lo, opt, hi)

        class Builder:
            def __init__(self, logger):
                pass

            def create_network(self, flags):
                fake.calls["network_flags"] = flags
                return object()

            def create_builder_config(self):
                return Config()

            def create_optimization_profile(self):
                return Profile()

            def build_serialized_network(self, network, config):
                return serialize(fake.calls["parsed"], fake.calls["shapes"]) if fake.builds else None

        class Runtime:
            def __init__(self, logger):
                pass

            def deserialize_cuda_engine(self, data: bytes):
                fake.calls["deserialized"] = len(data)
                if not data.startswith(ENGINE_MAGIC):
                    return None  # TensorRT logs why and returns None
                header, _, onnx_bytes = data[len(ENGINE_MAGIC):].partition(b"\n")
                return Engine(json.loads(header), onnx_bytes, fake)

        self.OnnxParser, self.Builder, self.Runtime = Parser, Builder, Runtime


class Engine:
    """A deserialized stand-in engine: the ONNX model in ONNX Runtime, its I/O tensors by name."""

    def __init__(self, profile: dict, onnx_bytes: bytes, trt: FakeTensorRT):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # the same arithmetic as a one-thread OnnxRuntimeInference
        self.session = ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
        self.profile, self.trt = profile, trt
        (inp,), (out,) = self.session.get_inputs(), self.session.get_outputs()
        self.shapes = {inp.name: (-1, *inp.shape[1:]), out.name: (-1, out.shape[1])}
        self.input_name, self.output_name = inp.name, out.name
        self.num_io_tensors = 2

    def get_tensor_name(self, index: int) -> str:
        return (self.input_name, self.output_name)[index]

    def get_tensor_shape(self, name: str) -> tuple:
        return self.shapes[name]

    def create_execution_context(self):
        return Context(self)


class Context:
    """An execution context: shapes and addresses are set by name; execute reads and writes device memory."""

    def __init__(self, engine: Engine):
        self.engine, self.input_shape, self.addresses = engine, None, {}
        self.calls = engine.trt.calls["bindings"]

    def set_input_shape(self, name: str, shape: tuple) -> bool:
        self.calls.append(("set_input_shape", name, tuple(shape)))
        p = self.engine.profile
        ok = name == self.engine.input_name and len(shape) == 4 and p["min"] <= shape[0] <= p["max"] \
            and tuple(shape[1:]) == tuple(self.engine.shapes[name][1:])
        self.input_shape = tuple(shape) if ok else None
        return ok

    def set_tensor_address(self, name: str, ptr: int) -> bool:
        self.calls.append(("set_tensor_address", name, ptr))
        self.addresses[name] = ptr
        return name in self.engine.shapes

    def execute_async_v3(self, stream_handle: int) -> bool:
        self.calls.append(("execute_async_v3", stream_handle))
        engine, memory = self.engine, self.engine.trt.gpu.memory
        if not engine.trt.executes or self.input_shape is None:
            return False
        x, z = memory[self.addresses[engine.input_name]], memory[self.addresses[engine.output_name]]
        if x.shape != self.input_shape or x.dtype != np.float32 or z.shape != (len(x), engine.shapes[engine.output_name][1]):
            return False  # a real engine would read or write past the buffers
        z[...] = engine.session.run(None, {engine.input_name: x})[0]
        return True
