"""Every size a file or a flag can ask for, bounded here before anything is allocated (docs/errors.md).

Each value says why it is what it is. A file or flag over a limit is refused in one line that names the
setting and the limit; nothing is allocated first. The runtime imports this module (it needs no NumPy).
"""

from __future__ import annotations

# --- Model sizes (config.json, preset TOML, --width and friends) --------------------------------
# The presets use blocks ≤ 12, width ≤ 512 and hidden ≤ 2048; these limits leave 10-30× headroom
# for experiments while keeping one bad digit from asking for terabytes.
MAX_BLOCKS = 256
MAX_WIDTH = 1 << 16  # any one width (d, a layer's output): bounds each matrix before the total is counted
MAX_HIDDEN = 1 << 16  # H, token_hidden, channel_hidden: as a width; the parameter total below binds first
MAX_LAYERS = 4096  # a layer list (preset or Studio): each layer is an op or two; far past any network here
MAX_CLASSES = 100_000  # ImageNet-21k has 21,841 classes
# The whole parameter vector: 2^28 fp32 values = 1 GiB, and training keeps ~4 such buffers
# (weights, gradients, two Adam moments); beyond that no machine LiteNet targets trains it.
MAX_PARAMETERS = 1 << 28

# LayerNorm's ε is added to the variance of its input, which is of order 1 in these networks: an ε of
# 10 already outweighs it (LayerNorm then mostly scales by 1/√ε); 1e30 would zero every output.
MAX_LN_EPS = 10.0

# --- Training schedule (TrainConfig) ------------------------------------------------------------
MAX_EPOCHS = 100_000  # 100,000 CIFAR-10 epochs is years on the hardware LiteNet targets
MAX_BATCH = 65_536  # more than the 50,000 training images: the batch can only repeat them
MAX_STEPS = 1_000_000_000  # warm-up steps: the schedule is per step; past 10^9 steps the warm-up never ends

MAX_TRACE_BATCH = 1024  # litenet trace prints every step for each image: beyond this it is unreadable anyway

# --- Export -------------------------------------------------------------------------------------
# 10,000 calibration images is already far more than a percentile or GPTQ needs (the default is 4,096).
MAX_CALIB_IMAGES = 10_000
# Bias correction holds every calibration image's live activations (litenet.export.pipeline): 4 GiB
# admits the default 4,096 images for the largest preset (litenet-mixer: ~0.5 MiB an image).
MAX_CALIB_BYTES = 4 << 30
# Threads: no machine LiteNet targets has more than 256 cores; more threads than cores only slow down.
MAX_THREADS = 256

# Data-parallel ranks (--gpus, --processes): 8 GPUs a host is the most LiteNet's NCCL launcher drives, and
# NumPy ranks past the cores only share them; 1024 leaves room while refusing 10^12 before any fork.
MAX_RANKS = 1024

# --- litenet-infer and litenet bench-infer ---------------------------------------------------------
MAX_INFER_BATCH = 65_536  # images in one forward pass (--batch-size, --batch): their float32 copy alone is 768 MiB
MAX_BENCH_CALLS = 1_000_000  # --loops and --warmup: each timed call keeps one float; a million is hours of work
MAX_BENCH_COOLDOWN_S = 3600.0  # a rest longer than an hour before each row is a typo

# --- Images (litenet-infer, litenet explain, Studio) ---------------------------------------------
# 50 megapixels: a 48 MP phone photo still decodes; Pillow's own default (89 MP) is more than a
# 1 GB Raspberry Pi can hold once decoded.
MAX_IMAGE_PIXELS = 50_000_000
# Decoded bytes, from the header, before decoding: Pillow keeps 4 bytes a pixel for RGB and most modes,
# plus a row pointer and decoder state per row, so a 1 × 49,000,000 image (one pixel a row) costs far
# more than its pixel count says. 256 MiB admits a 48 MP photo and keeps the measured peak of one
# image (decode, crop, conversion, resize) at or under ~610 MB, within a 1 GB Pi (docs/runtime.md).
MAX_DECODED_BYTES = 256 << 20
ROW_OVERHEAD_BYTES = 24  # measured: Pillow's row pointer plus the PNG decoder's per-row state
_BYTES_PER_PIXEL = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2}


def decoded_image_bytes(width: int, height: int, mode: str) -> int:
    """What Pillow needs to hold an image of this size and mode once decoded (4 bytes a pixel unless listed)."""
    return width * height * _BYTES_PER_PIXEL.get(mode, 4) + height * ROW_OVERHEAD_BYTES


# --- CIFAR-10 batch files (litenet data: a folder, or members of a .tar.gz) --------------------------
# A binary batch is 10,000 records of 3,073 bytes (30,730,000 bytes); a pickled batch is ~31 MB. A
# file larger than 64 MiB is not CIFAR-10, whatever its name: refused from its size (an archive
# member's from its tar header) before a byte of it is read or decompressed.
MAX_BATCH_FILE_BYTES = 64 << 20
