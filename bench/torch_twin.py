"""The same LiteNet model and training step in PyTorch: the named peer of the benchmarks.

Written as a new PyTorch user would (autograd, nn.functional, torch.optim.SGD) but computing
exactly LiteNet's function: same parameter layout and initial values, same loss, same clip rule.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from litenet.model import ModelConfig, TrainConfig, param_layout


class TorchLiteNet(torch.nn.Module):
    def __init__(self, model: ModelConfig, params: np.ndarray):
        super().__init__()
        self.cfg = model
        self.names = [p.name for p in param_layout(model)]
        for p in param_layout(model):
            value = torch.from_numpy(np.array(params[p.offset:p.offset + p.size].reshape(p.shape), np.float32))
            self.register_parameter(p.name.replace(".", "_"), torch.nn.Parameter(value))

    def p(self, name: str) -> torch.Tensor:
        return getattr(self, name.replace(".", "_"))

    def forward(self, images_u8: torch.Tensor) -> torch.Tensor:
        m = self.cfg
        x = images_u8.float() / 255.0 - m.input_shift
        x = x.reshape(x.shape[0], 1024, 3)
        x = x.sum(dim=2) if m.embed == "channel-sum" else x.reshape(x.shape[0], 3072)
        h = x @ self.p("embed.weight")
        for i in range(m.blocks):
            a = F.gelu(h @ self.p(f"blocks.{i}.fc1.weight") + self.p(f"blocks.{i}.fc1.bias"), approximate="tanh")
            v = a @ self.p(f"blocks.{i}.fc2.weight") + self.p(f"blocks.{i}.fc2.bias")
            h = F.layer_norm(h + v, (m.width,), self.p(f"blocks.{i}.ln.gamma"), self.p(f"blocks.{i}.ln.beta"), m.ln_eps)
        return h @ self.p("head.weight") + self.p("head.bias")

    def flat_params(self) -> np.ndarray:
        return np.concatenate([self.p(n).detach().cpu().numpy().ravel() for n in self.names])


def margin_loss(z: torch.Tensor, labels: torch.Tensor, margin: float) -> torch.Tensor:
    true = z.gather(1, labels[:, None])[:, 0]
    rival = z.scatter(1, labels[:, None], float("-inf")).max(dim=1).values
    return torch.clamp(margin - true + rival, min=0).mean()


def loss_fn(z, labels, train: TrainConfig):
    return margin_loss(z, labels, train.margin) if train.loss == "margin" else F.cross_entropy(z, labels)


class TorchTrainer:
    """One SGD step as a PyTorch user writes it, with the seed's clip rule done without a host sync."""

    def __init__(self, model: ModelConfig, train: TrainConfig, params: np.ndarray, device: str = "cpu"):
        self.train = train
        self.net = TorchLiteNet(model, params).to(device)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=train.lr, momentum=train.momentum,
                                   weight_decay=train.weight_decay)

    def step(self, images: torch.Tensor, labels: torch.Tensor, lr: float | torch.Tensor) -> torch.Tensor:
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=False)
        loss = loss_fn(self.net(images), labels, self.train)
        loss.backward()
        grads = [p.grad for p in self.net.parameters()]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        scale = torch.where(norm > self.train.clip_threshold, self.train.clip_norm / norm, torch.ones_like(norm))
        torch._foreach_mul_(grads, scale)
        self.opt.step()
        return loss.detach()


class TorchTwin:
    """The GPU benchmark's peer: data, batch order, lrs and flips live on the device with a step counter,
    so `step()` never synchronises with the host and can be captured in a CUDA graph."""

    def __init__(self, model: ModelConfig, train: TrainConfig, params: np.ndarray, images, labels,
                 batches, lrs, flips, device: str = "cuda"):
        def on_device(array, dtype=None):
            return torch.from_numpy(np.ascontiguousarray(array if dtype is None else np.asarray(array, dtype))).to(device)

        self.train = train
        self.net = TorchLiteNet(model, params).to(device)
        self.params = list(self.net.parameters())
        for p in self.params:  # gradients exist before capture; zeroed in place each step
            p.grad = torch.zeros_like(p)
        self.velocity = [torch.zeros_like(p) for p in self.params]
        self.images, self.labels = on_device(images), on_device(labels, np.int64)
        self.batches, self.lrs = on_device(batches, np.int64), on_device(lrs, np.float32)
        self.flips = on_device(flips, bool)
        self.counter = torch.zeros(1, dtype=torch.int64, device=device)

    def forward(self, images: torch.Tensor, flip: torch.Tensor) -> torch.Tensor:
        images = torch.where(flip[:, None, None, None], images.flip(2), images)
        return self.net(images)

    def loss(self, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return loss_fn(z, labels, self.train)

    def step(self) -> None:
        t = self.train
        idx = self.batches.index_select(0, self.counter)[0]
        flip = self.flips.index_select(0, self.counter)[0]
        lr = self.lrs.index_select(0, self.counter)[0]
        for p in self.params:
            p.grad.zero_()
        self.loss(self.forward(self.images.index_select(0, idx), flip), self.labels.index_select(0, idx)).backward()
        grads = [p.grad for p in self.params]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        scale = torch.where(norm > t.clip_threshold, t.clip_norm / norm, torch.ones_like(norm))
        with torch.no_grad():  # SGD with momentum and weight decay, as torch.optim.SGD computes it
            torch._foreach_mul_(grads, scale)
            torch._foreach_add_(grads, self.params, alpha=t.weight_decay)
            torch._foreach_mul_(self.velocity, t.momentum)
            torch._foreach_add_(self.velocity, grads)
            torch._foreach_sub_(self.params, torch._foreach_mul(self.velocity, lr))
            self.counter.add_(1).remainder_(len(self.batches))


class GraphedStep:
    """A TorchTwin step captured once in a CUDA graph and replayed (PyTorch's whole-network capture)."""

    def __init__(self, twin: TorchTwin, warmup: int = 3):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as the CUDA graphs docs require
            for _ in range(warmup):
                twin.step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            twin.step()

    def __call__(self) -> None:
        self.graph.replay()
