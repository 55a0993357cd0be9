"""The LiteNet-Mixer and its recipe written as a PyTorch user would: the peers bench_mixer_gpu.py and
bench_steps_gpu.py measure LiteNet's kernels against, on the same GPU, in LiteNet's precision (fp32 with
TF32 off, tf32, or bf16 under autocast).

Same network (litenet.graph.mixer_ops: patches → linear embedding → blocks of [LayerNorm → MLP
across the patches (a Linear on the transposed tensor)] and [LayerNorm → MLP across the channels],
each residual → LayerNorm → mean over the patches → head), the same initial weights (copied from
litenet.model.init_params), AdamW with no decay on biases and LayerNorm's γ and β (fused), label
smoothing, warm-up then cosine per step. The training set lives on the GPU as uint8 and the
augmentation (random crop of the reflect-padded image, flip, cutout, CutMix) runs there, from the same
per-epoch offsets, flips, cutout centres and CutMix boxes LiteNet's schedule draws.

TorchTrainer: the eager step (optionally its forward under torch.compile). GraphedTrainer: the peer of
record — torch.compile's forward and the whole step in one CUDA graph, fused capturable AdamW.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from litenet.model import MixerConfig, TrainConfig, param_views
from litenet.train.augment import CUTOUT_FILL

PRECISIONS = ("fp32", "tf32", "bf16")  # LiteNet's TrainConfig.precision values


class Block(nn.Module):
    def __init__(self, m: MixerConfig):
        super().__init__()
        T = m.tokens
        self.token_ln, self.channel_ln = nn.LayerNorm(m.width, eps=m.ln_eps), nn.LayerNorm(m.width, eps=m.ln_eps)
        self.token_fc1, self.token_fc2 = nn.Linear(T, m.token_hidden), nn.Linear(m.token_hidden, T)
        self.channel_fc1, self.channel_fc2 = nn.Linear(m.width, m.channel_hidden), nn.Linear(m.channel_hidden, m.width)

    def forward(self, x):  # x (B, T, d)
        y = self.token_ln(x).transpose(1, 2)
        x = x + self.token_fc2(F.gelu(self.token_fc1(y), approximate="tanh")).transpose(1, 2)
        return x + self.channel_fc2(F.gelu(self.channel_fc1(self.channel_ln(x)), approximate="tanh"))


class TorchMixer(nn.Module):
    def __init__(self, m: MixerConfig):
        super().__init__()
        self.m = m
        self.embed = nn.Linear(m.patch * m.patch * 3, m.width)
        self.blocks = nn.ModuleList(Block(m) for _ in range(m.blocks))
        self.final_ln = nn.LayerNorm(m.width, eps=m.ln_eps)
        self.head = nn.Linear(m.width, m.classes)

    def forward(self, x):  # x (B, 32, 32, 3) floats in [0, 1]
        P, G = self.m.patch, 32 // self.m.patch
        p = x.reshape(-1, G, P, G, P, 3).permute(0, 1, 3, 2, 4, 5).reshape(-1, G * G, P * P * 3)
        h = self.embed((p - self.m.input_shift) * self.m.input_scale)
        for block in self.blocks:
            h = block(h)
        return self.head(self.final_ln(h).mean(1))

    def load_litenet(self, params: np.ndarray) -> None:
        """LiteNet's flat parameters: Linear weights are stored (in, out) there, (out, in) here."""
        views = param_views(params.astype(np.float32), self.m)
        state = {}
        for name, value in views.items():
            key = name.replace(".gamma", ".weight").replace(".beta", ".bias")
            is_matrix = name.endswith(".weight") and value.ndim == 2
            state[key] = torch.tensor(value.T.copy() if is_matrix else value)
        self.load_state_dict(state)


def augment(images_u8: torch.Tensor, index: torch.Tensor, flips: torch.Tensor, crops: torch.Tensor, pad: int,
            cutouts: torch.Tensor | None = None, cut: int = 0, mixes: torch.Tensor | None = None):
    """The batch's images as floats in [0, 1], cropped from the reflect-padded image, flipped, then with
    the cut × cut square at cutouts[b] filled with CUTOUT_FILL / 255 (litenet.train.augment.cutout_square's
    rule: rows and columns from centre − ⌊cut/2⌋, clipped to the image), then with CutMix's box of
    mixes[b] = (partner, top, left, bottom, right) from image `partner` (litenet.train.augment.mix_boxes),
    on the GPU."""
    x = _crop_flip_cutout(images_u8, index, flips, crops, pad, cutouts, cut)
    if mixes is None:
        return x
    steps = torch.arange(32, device=x.device)
    rows = (steps >= mixes[:, 1, None]) & (steps < mixes[:, 3, None])
    cols = (steps >= mixes[:, 2, None]) & (steps < mixes[:, 4, None])
    box = (mixes[:, 0, None, None] >= 0) & rows[:, :, None] & cols[:, None, :]
    return torch.where(box[:, :, :, None], x[mixes[:, 0].clamp(min=0)], x)


def _crop_flip_cutout(images_u8, index, flips, crops, pad, cutouts, cut):
    x = images_u8.index_select(0, index).permute(0, 3, 1, 2).float() / 255.0  # (B, 3, 32, 32)
    if pad:
        x = F.pad(x, (pad, pad, pad, pad), mode="reflect")
        rows = crops[:, 0, None] + torch.arange(32, device=x.device)  # (B, 32)
        cols = crops[:, 1, None] + torch.arange(32, device=x.device)
        b = torch.arange(len(x), device=x.device)[:, None, None]
        x = x.permute(0, 2, 3, 1)[b, rows[:, :, None], cols[:, None, :]]  # (B, 32, 32, 3)
    else:
        x = x.permute(0, 2, 3, 1)
    x = torch.where(flips[:, None, None, None], x.flip(2), x)
    if cutouts is None or not cut:
        return x
    steps = torch.arange(32, device=x.device)
    low = cutouts.long() - cut // 2  # (B, 2)
    inside = (steps >= low[:, :, None]) & (steps < low[:, :, None] + cut)  # (B, 2, 32): rows, columns
    square = inside[:, 0, :, None] & inside[:, 1, None, :]
    return torch.where(square[:, :, :, None], CUTOUT_FILL / 255.0, x)  # a scalar, not a tensor: no host copy in a graph


def set_matmul_precision(precision: str) -> None:
    """PyTorch's float32 matrix-product flags for one of LiteNet's precisions: fp32 with TF32 off (both
    sides multiply in full fp32), TF32 on for tf32, and for bf16 too (for what autocast leaves in fp32)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    tf32 = precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def autocast(precision: str, device_type: str = "cuda"):
    """The context a step's forward and loss run under: BF16 autocast for bf16, nothing otherwise. No
    weight-cast cache: inside a CUDA graph it would hold one step's casts."""
    if precision == "bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16, cache_enabled=False)
    return contextlib.nullcontext()


def recipe_loss(z: torch.Tensor, labels: torch.Tensor, mixes: torch.Tensor | None, smoothing: float) -> torch.Tensor:
    """Label-smoothed cross-entropy; with CutMix, each image's loss against its own label and its partner's,
    weighed by the box's area."""
    if mixes is None:
        return F.cross_entropy(z, labels, label_smoothing=smoothing)
    partner = mixes[:, 0]
    share = torch.where(partner >= 0, (mixes[:, 3] - mixes[:, 1]) * (mixes[:, 4] - mixes[:, 2]) / 1024.0, 0.0)
    own = F.cross_entropy(z, labels, label_smoothing=smoothing, reduction="none")
    theirs = F.cross_entropy(z, labels[partner.clamp(min=0)], label_smoothing=smoothing, reduction="none")
    return ((1.0 - share) * own + share * theirs).mean()


def adamw(net: nn.Module, t: TrainConfig, lr: float | torch.Tensor, capturable: bool = False) -> torch.optim.AdamW:
    """Fused AdamW with the recipe's decay: on the matrices alone (decay="weights") or on the rest alone."""
    matrix = {n: n.endswith(".weight") and p.ndim == 2 for n, p in net.named_parameters()}
    decay = [p for n, p in net.named_parameters() if matrix[n]]
    other = [p for n, p in net.named_parameters() if not matrix[n]]
    on_weights = t.decay == "weights"
    return torch.optim.AdamW([{"params": decay, "weight_decay": t.weight_decay if on_weights else 0.0},
                              {"params": other, "weight_decay": 0.0 if on_weights else t.weight_decay}],
                             lr=lr, betas=(t.beta1, t.beta2), eps=t.adam_eps, fused=True, capturable=capturable)


class TorchTrainer:
    """AdamW training of TorchMixer, eager (or its forward under torch.compile); `step(index, flips, crops, lr,
    cutouts, mixes)` is one training step from device tensors of the step's draws. `precision`: fp32 (TF32
    off), tf32, or bf16 (autocast), as set_matmul_precision and autocast say."""

    def __init__(self, m: MixerConfig, t: TrainConfig, params: np.ndarray, images: np.ndarray, labels: np.ndarray,
                 compile: bool = False, device: str = "cuda", precision: str = "tf32"):
        set_matmul_precision(precision)
        self.m, self.t, self.precision = m, t, precision
        self.net = TorchMixer(m).to(device)
        self.net.load_litenet(params)
        self.opt = adamw(self.net, t, t.lr)
        self.images = torch.tensor(images, device=device)
        self.labels = torch.tensor(labels.astype(np.int64), device=device)
        self.pad = t.crop_padding if "crop" in t.augmentations else 0
        self.cut = t.cutout_size if "cutout" in t.augmentations else 0
        self.mix = "cutmix" in t.augmentations
        if compile:
            # Static shapes (a fixed batch): no "automatic dynamic" graph because an earlier contender in
            # this process took another batch size. Each batch size and precision a process times is a
            # graph of its own; room for many, so that none falls back to eager past the limit. (Not
            # torch._dynamo.reset(): it would drop the compiled code of any other compiled trainer alive.)
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        self.forward = torch.compile(self.net, dynamic=False) if compile else self.net

    def loss(self, index: torch.Tensor, flips: torch.Tensor, crops: torch.Tensor,
             cutouts: torch.Tensor | None = None, mixes: torch.Tensor | None = None) -> torch.Tensor:
        """The step's loss: the batch augmented from its draws, the forward and the loss in the precision."""
        mixes = mixes if self.mix else None
        x = augment(self.images, index, flips, crops, self.pad, cutouts, self.cut, mixes)
        with autocast(self.precision, self.images.device.type):
            return recipe_loss(self.forward(x), self.labels.index_select(0, index), mixes, self.t.label_smoothing)

    def step(self, index: torch.Tensor, flips: torch.Tensor, crops: torch.Tensor, lr: float,
             cutouts: torch.Tensor | None = None, mixes: torch.Tensor | None = None) -> torch.Tensor:
        for group in self.opt.param_groups:
            group["lr"] = lr
        loss = self.loss(index, flips, crops, cutouts, mixes)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.detach()

    @torch.no_grad()
    def logits(self, images: np.ndarray, batch: int = 1000) -> np.ndarray:
        """Test-set logits by the eager network (no compilation for a new batch shape) in the precision."""
        out = []
        for i in range(0, len(images), batch):
            x = torch.tensor(images[i:i + batch], device=self.images.device).float() / 255.0
            with autocast(self.precision, self.images.device.type):
                out.append(self.net(x).float().cpu().numpy())
        return np.concatenate(out)


class GraphedTrainer(TorchTrainer):
    """The peer of record: the step as a speed-minded PyTorch user writes it. The forward under
    torch.compile (default mode) and the WHOLE step — augmentation from the step's draws, forward, loss,
    backward, fused capturable AdamW with the learning rate in a device tensor — captured once in one
    CUDA graph (PyTorch's whole-network capture: warm-up on a side stream, then the capture); each step
    copies its draws and learning rate into the graph's static inputs and replays it.

    The warm-up steps run at learning rate 0 on placeholder draws, and the weights and AdamW's state are
    put back after the capture, so training starts from the same point as every other contender's. The
    construction (compilation, warm-up, capture) is the one-time cost: `setup_seconds`.

    graph=False, compile=False run the same step eagerly on any device (what the tests hold against
    TorchTrainer)."""

    def __init__(self, m: MixerConfig, t: TrainConfig, params: np.ndarray, images: np.ndarray, labels: np.ndarray,
                 precision: str = "bf16", device: str = "cuda", compile: bool = True, graph: bool = True,
                 warmup: int = 3):
        started = time.perf_counter()
        super().__init__(m, t, params, images, labels, compile=compile, device=device, precision=precision)
        dev, batch = self.images.device, t.batch_size
        self.lr = torch.tensor(float(t.lr), device=dev)
        self.opt = adamw(self.net, t, self.lr, capturable=graph)  # capturable: only CUDA has it
        self.static_index = torch.zeros(batch, dtype=torch.int64, device=dev)
        self.static_flips = torch.zeros(batch, dtype=torch.bool, device=dev)
        self.static_crops = torch.zeros(batch, 2, dtype=torch.int64, device=dev)
        self.static_cutouts = torch.zeros(batch, 2, dtype=torch.int64, device=dev) if self.cut else None
        no_box = torch.tensor([-1, 0, 0, 0, 0], dtype=torch.int64, device=dev)  # partner −1: nothing mixed in
        self.static_mixes = no_box.repeat(batch, 1) if self.mix else None
        self.graph = None
        if graph:
            self.graph, self.static_loss = self._capture(warmup)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        self.setup_seconds = time.perf_counter() - started

    def step(self, index: torch.Tensor, flips: torch.Tensor, crops: torch.Tensor, lr: float,
             cutouts: torch.Tensor | None = None, mixes: torch.Tensor | None = None) -> torch.Tensor:
        """Copies the step's draws and learning rate into the graph's inputs and replays it; returns the
        loss (the graph's output: the next step overwrites it)."""
        self.static_index.copy_(index)
        self.static_flips.copy_(flips)
        self.static_crops.copy_(crops)
        for static, draw, name in ((self.static_cutouts, cutouts, "cutouts"), (self.static_mixes, mixes, "mixes")):
            if static is not None:
                if draw is None:
                    raise ValueError(f"the recipe draws {name}: step needs them")
                static.copy_(draw)
        self.lr.fill_(lr)
        if self.graph is not None:
            self.graph.replay()
            return self.static_loss
        self.opt.zero_grad(set_to_none=True)
        return self._whole_step()

    def _whole_step(self) -> torch.Tensor:
        """What the graph holds: from the static inputs to the updated weights."""
        loss = self.loss(self.static_index, self.static_flips, self.static_crops, self.static_cutouts,
                         self.static_mixes)
        loss.backward()
        self.opt.step()
        return loss.detach()

    def _capture(self, warmup: int):
        """Warm-up (compilation, AdamW's state) on a side stream, then the capture; the warm-up undone."""
        params = list(self.net.parameters())
        initial = [p.detach().clone() for p in params]
        self.lr.fill_(0.0)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self.opt.zero_grad(set_to_none=True)
                self._whole_step()
        torch.cuda.current_stream().wait_stream(side)
        self.opt.zero_grad(set_to_none=True)  # the backward in the graph allocates the gradients from its pool
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            loss = self._whole_step()
        with torch.no_grad():  # in place: the graph reads these very tensors
            for p, p0 in zip(params, initial):
                p.copy_(p0)
            for state in self.opt.state.values():
                for value in state.values():
                    value.zero_()
        return graph, loss
