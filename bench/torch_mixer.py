"""The LiteNet-Mixer and its recipe written as a PyTorch user would: the peer bench_mixer_gpu.py measures
LiteNet's kernels against, on the same GPU, in eager mode and under torch.compile, TF32 on.

Same network (litenet.graph.mixer_ops: patches → linear embedding → blocks of [LayerNorm → MLP
across the patches (a Linear on the transposed tensor)] and [LayerNorm → MLP across the channels],
each residual → LayerNorm → mean over the patches → head), the same initial weights (copied from
litenet.model.init_params), AdamW with no decay on biases and LayerNorm's γ and β (fused), label
smoothing, warm-up then cosine per step. The training set lives on the GPU as uint8 and the
augmentation (random crop of the reflect-padded image, flip, cutout, CutMix) runs there, from the same
per-epoch offsets, flips, cutout centres and CutMix boxes LiteNet's schedule draws.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from litenet.model import MixerConfig, TrainConfig, param_views
from litenet.train.augment import CUTOUT_FILL


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
    return torch.where(square[:, :, :, None], torch.tensor(CUTOUT_FILL / 255.0, device=x.device), x)


class TorchTrainer:
    """AdamW training of TorchMixer; `step(index, flips, crops, lr)` is one training step."""

    def __init__(self, m: MixerConfig, t: TrainConfig, params: np.ndarray, images: np.ndarray, labels: np.ndarray,
                 compile: bool = False, device: str = "cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        self.m, self.t = m, t
        self.net = TorchMixer(m).to(device)
        self.net.load_litenet(params)
        decay = [p for n, p in self.net.named_parameters() if n.endswith(".weight") and p.ndim == 2]
        other = [p for n, p in self.net.named_parameters() if not (n.endswith(".weight") and p.ndim == 2)]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": t.weight_decay if t.decay == "weights" else 0},
                                      {"params": other, "weight_decay": 0.0 if t.decay == "weights" else t.weight_decay}],
                                     lr=t.lr, betas=(t.beta1, t.beta2), eps=t.adam_eps, fused=True)
        self.images = torch.tensor(images, device=device)
        self.labels = torch.tensor(labels.astype(np.int64), device=device)
        self.pad = t.crop_padding if "crop" in t.augmentations else 0
        self.cut = t.cutout_size if "cutout" in t.augmentations else 0
        self.mix = "cutmix" in t.augmentations
        self.forward = torch.compile(self.net) if compile else self.net

    def step(self, index: torch.Tensor, flips: torch.Tensor, crops: torch.Tensor, lr: float,
             cutouts: torch.Tensor | None = None, mixes: torch.Tensor | None = None) -> torch.Tensor:
        for group in self.opt.param_groups:
            group["lr"] = lr
        mixes = mixes if self.mix else None
        x = augment(self.images, index, flips, crops, self.pad, cutouts, self.cut, mixes)
        z, labels = self.forward(x), self.labels.index_select(0, index)
        if mixes is None:
            loss = F.cross_entropy(z, labels, label_smoothing=self.t.label_smoothing)
        else:  # CutMix: each image's loss against its own label and its partner's, weighed by the box's area
            partner, eps = mixes[:, 0], self.t.label_smoothing
            share = torch.where(partner >= 0, (mixes[:, 3] - mixes[:, 1]) * (mixes[:, 4] - mixes[:, 2]) / 1024.0, 0.0)
            own = F.cross_entropy(z, labels, label_smoothing=eps, reduction="none")
            theirs = F.cross_entropy(z, labels[partner.clamp(min=0)], label_smoothing=eps, reduction="none")
            loss = ((1.0 - share) * own + share * theirs).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.detach()

    @torch.no_grad()
    def logits(self, images: np.ndarray, batch: int = 1000) -> np.ndarray:
        out = []
        for i in range(0, len(images), batch):
            x = torch.tensor(images[i:i + batch], device=self.images.device).float() / 255.0
            out.append(self.forward(x).float().cpu().numpy())
        return np.concatenate(out)
