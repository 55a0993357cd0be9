"""Refuse an ONNX model whose tensors name external data outside its folder, before ONNX Runtime sees it.

ONNX lets a tensor keep its bytes in another file (`external_data`: location, offset, length).
Some ONNX Runtime releases follow any location — `../../etc/passwd`, an absolute path, a symlink in
the model's folder — and read that file as weights, so a crafted model could print a secret file's
bytes as logits. LiteNet checks every location itself, whatever ONNX Runtime is installed: it must
be a relative path to a regular file inside the model's folder, reached through no symlink.

The model is walked with a minimal protobuf reader (the runtime does not depend on the `onnx`
package): every TensorProto in the graph's initializers, in node attributes, in sparse tensors and
in subgraphs and functions.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from litenet.errors import LiteNetError

# Field numbers from onnx.proto (ir_version 3 and later); only the paths that can hold a TensorProto.
MODEL_GRAPH, MODEL_FUNCTIONS = 7, 25
GRAPH_NODES, GRAPH_INITIALIZERS, GRAPH_SPARSE_INITIALIZERS = 1, 5, 15
NODE_ATTRIBUTES = 5
FUNCTION_NODES = 7
ATTR_T, ATTR_G, ATTR_TENSORS, ATTR_GRAPHS, ATTR_SPARSE_TENSOR, ATTR_SPARSE_TENSORS = 5, 6, 10, 11, 22, 23
SPARSE_VALUES, SPARSE_INDICES = 1, 2
TENSOR_NAME, TENSOR_EXTERNAL_DATA, TENSOR_DATA_LOCATION = 8, 13, 14
ENTRY_KEY, ENTRY_VALUE = 1, 2
MAX_DEPTH = 64  # subgraphs inside subgraphs: far past any real model, and no recursion blow-up


class _Malformed(ValueError):
    pass


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Malformed("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview):
    """(field number, wire type, value) of one message: value is an int or a memoryview of the bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = None, pos + 8
        elif wire == 5:
            value, pos = None, pos + 4
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise _Malformed("truncated field")
            value, pos = buf[pos:pos + length], pos + length
        else:
            raise _Malformed(f"wire type {wire}")
        if pos > len(buf):
            raise _Malformed("truncated field")
        yield number, wire, value


def _messages(buf: memoryview, number: int):
    return (v for n, w, v in _fields(buf) if n == number and w == 2)


def _tensor(buf: memoryview) -> tuple[str, str | None]:
    """(name, external location or None) of one TensorProto."""
    name, location, external = "", None, False
    for n, w, v in _fields(buf):
        if n == TENSOR_NAME and w == 2:
            name = bytes(v).decode("utf-8", "replace")
        elif n == TENSOR_DATA_LOCATION and w == 0:
            external = v == 1
        elif n == TENSOR_EXTERNAL_DATA and w == 2:
            entry = {k: bytes(val).decode("utf-8", "replace") for k, wt, val in _fields(v) if wt == 2}
            if entry.get(ENTRY_KEY) == "location":
                location = entry.get(ENTRY_VALUE, "")
    if external and location is None:
        location = ""
    return name, location


def _graph_tensors(graph: memoryview, depth: int):
    if depth > MAX_DEPTH:
        raise _Malformed("subgraphs nested too deeply")
    for n, w, v in _fields(graph):
        if w != 2:
            continue
        if n == GRAPH_INITIALIZERS:
            yield _tensor(v)
        elif n == GRAPH_SPARSE_INITIALIZERS:
            yield from _sparse_tensors(v)
        elif n == GRAPH_NODES:
            yield from _node_tensors(v, depth)


def _sparse_tensors(buf: memoryview):
    for part in (SPARSE_VALUES, SPARSE_INDICES):
        for t in _messages(buf, part):
            yield _tensor(t)


def _node_tensors(node: memoryview, depth: int):
    for attribute in _messages(node, NODE_ATTRIBUTES):
        for n, w, v in _fields(attribute):
            if w != 2:
                continue
            if n in (ATTR_T, ATTR_TENSORS):
                yield _tensor(v)
            elif n in (ATTR_SPARSE_TENSOR, ATTR_SPARSE_TENSORS):
                yield from _sparse_tensors(v)
            elif n in (ATTR_G, ATTR_GRAPHS):
                yield from _graph_tensors(v, depth + 1)


def external_locations(model_bytes: bytes) -> list[tuple[str, str]]:
    """(tensor name, location) of every tensor that keeps its data in another file; ValueError when malformed."""
    buf = memoryview(model_bytes)
    found = []
    for n, w, v in _fields(buf):
        if w != 2:
            continue
        if n == MODEL_GRAPH:
            found += [t for t in _graph_tensors(v, 0) if t[1] is not None]
        elif n == MODEL_FUNCTIONS:
            for node in _messages(v, FUNCTION_NODES):
                found += [t for t in _node_tensors(node, 0) if t[1] is not None]
    return found


def check_external_data(path: Path, model_bytes: bytes | None = None) -> None:
    """Refuse `path` (LiteNetError naming the tensor and its location) unless every external data
    location is a regular file inside the model's folder reached through no symlink."""
    path = Path(path)
    data = path.read_bytes() if model_bytes is None else model_bytes
    try:
        found = external_locations(data)
    except ValueError:
        return  # not a protobuf LiteNet can walk: ONNX Runtime refuses it as not a model
    folder = Path(os.path.realpath(path.parent))
    for name, location in found:
        problem = _location_problem(folder, location)
        if problem:
            raise LiteNetError(f"{path}: tensor {name!r} names external data {location!r}, {problem}; refused "
                               "(a model's external data must be a file inside its own folder); re-export the model")


def _location_problem(folder: Path, location: str) -> str | None:
    if not location:
        return "an empty location"
    if "\0" in location or os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location:
        return "an absolute path"
    parts = Path(location).parts
    if ".." in parts:
        return "which leaves the model's folder"
    current = folder
    for part in parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return "which does not exist"
        if stat.S_ISLNK(mode):
            return "which is (or goes through) a symlink"
    if not stat.S_ISREG(mode):
        return "which is not a regular file"
    return None
