"""The LiteNet network and training step written with PyTorch ops — the peer bench_gpu.py measures
LiteNet's kernels against, on the same GPU, in fp32 with TF32 off.

Same model, same loss (the margin written with torch ops), same clip rule and SGD, and, like
LiteNet, no host synchronisation inside a step: the batch, flips and learning rate are read from
device tensors through a device-side step counter, so the whole step can be captured in one
CUDA graph (`GraphedStep`) as well as run eagerly.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from litenet.model import ModelConfig, TrainConfig, param_views


class TorchTwin:
    def __init__(self, model: ModelConfig, train: TrainConfig, params: np.ndarray, images: np.ndarray,
                 labels: np.ndarray, batches: np.ndarray, lrs: np.ndarray, flips: np.ndarray, device="cuda"):
        self.m, self.t = model, train
        self.params = {k: torch.tensor(np.array(v), device=device, requires_grad=True)
                       for k, v in param_views(params.astype(np.float32), model).items()}
        self.velocity = [torch.zeros_like(p) for p in self.params.values()]
        self.images = torch.tensor(images, device=device)  # uint8, on the GPU like LiteNet's
        self.labels = torch.tensor(labels.astype(np.int64), device=device)
        self.batches = torch.tensor(batches.astype(np.int64), device=device)
        self.lrs = torch.tensor(lrs.astype(np.float32), device=device)
        self.flips = torch.tensor(flips.astype(bool), device=device)
        self.step_t = torch.zeros(1, dtype=torch.int64, device=device)

    def forward(self, x_u8: torch.Tensor, flip: torch.Tensor | None) -> torch.Tensor:
        m, p = self.m, self.params
        x = x_u8.float() / 255.0
        if m.input_shift:
            x = x - m.input_shift
        if flip is not None:
            x = torch.where(flip[:, None, None, None], x.flip(2), x)
        s = x.reshape(len(x), 1024, 3).sum(2) if m.embed == "channel-sum" else x.reshape(len(x), 3072)
        h = s @ p["embed.weight"]
        for i in range(m.blocks):
            u = h @ p[f"blocks.{i}.fc1.weight"] + p[f"blocks.{i}.fc1.bias"]
            v = F.gelu(u, approximate="tanh") @ p[f"blocks.{i}.fc2.weight"] + p[f"blocks.{i}.fc2.bias"]
            h = F.layer_norm(h + v, (m.width,), p[f"blocks.{i}.ln.gamma"], p[f"blocks.{i}.ln.beta"], m.ln_eps)
        return h @ p["head.weight"] + p["head.bias"]

    def loss(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.t.loss != "margin":
            return F.cross_entropy(z, y)
        true = z.gather(1, y[:, None])[:, 0]
        mask = torch.zeros_like(z, dtype=torch.bool).scatter_(1, y[:, None], True)  # no host sync, unlike one_hot
        rival = z.masked_fill(mask, float("-inf")).amax(1)
        return torch.relu(self.t.margin - true + rival).mean()

    def step(self) -> None:
        """Forward, backward, clip rule and SGD for the batch at the device step counter."""
        t = self.t
        pos = self.step_t % len(self.batches)
        idx = self.batches.index_select(0, pos)[0]
        flip = self.flips.index_select(0, pos)[0]
        lr = self.lrs.index_select(0, pos)[0]  # 0-dim: _foreach_mul takes a scalar tensor
        loss = self.loss(self.forward(self.images.index_select(0, idx), flip), self.labels.index_select(0, idx))
        params = list(self.params.values())
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            scale = torch.where(norm > t.clip_threshold, t.clip_norm / norm, torch.ones_like(norm))
            grads = torch._foreach_mul(grads, scale)
            torch._foreach_add_(grads, params, alpha=t.weight_decay)
            torch._foreach_mul_(self.velocity, t.momentum)
            torch._foreach_add_(self.velocity, grads)
            torch._foreach_sub_(params, torch._foreach_mul(self.velocity, lr))
            self.step_t += 1


class GraphedStep:
    """The whole step captured once in a CUDA graph (PyTorch's documented recipe), then replayed."""

    def __init__(self, twin: TorchTwin, warmup: int = 3):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                twin.step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            twin.step()

    def __call__(self) -> None:
        self.graph.replay()
