"""The same LiteNet model and training step in PyTorch: the named peer of the CPU benchmarks.

Written as a new PyTorch user would (autograd, nn.functional, torch.optim.SGD; for the Mixer nn.Linear,
nn.LayerNorm and torch.optim.AdamW) but computing exactly LiteNet's function: same parameter layout
and initial values, same loss, same clip rule.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch_mixer import TorchMixer  # bench/torch_mixer.py (bench/ is on sys.path where this is imported)

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


# ---------------------------------------------------------------------------------------------
# The Mixer family: the network is bench/torch_mixer.py's TorchMixer (nn.Linear / nn.LayerNorm on
# (B, T, C), the token MLP a Linear on the transposed tensor, LiteNet's weights loaded transposed),
# shared with the GPU benchmark; here its CPU training step, as a PyTorch user writes it.


class TorchMixerTrainer:
    """One AdamW step as a PyTorch user writes it: weight decay on the weight matrices only (no decay
    on biases nor LayerNorm's γ, β: LiteNet's decay = "weights"), cross-entropy with label smoothing,
    no clipping (the Mixer presets' clip_threshold is inf). `adamw` picks torch's implementation:
    "default" (what torch.optim.AdamW chooses on the CPU), "foreach" or "fused"."""

    def __init__(self, model, train: TrainConfig, params: np.ndarray, adamw: str = "default"):
        if train.optimizer != "adamw" or train.loss != "cross-entropy" or train.clip_threshold != float("inf"):
            raise ValueError("TorchMixerTrainer covers the Mixer recipe: AdamW, cross-entropy, no clipping")
        self.train = train
        self.net = TorchMixer(model)
        self.net.load_litenet(params)
        decay = [p for p in self.net.parameters() if p.ndim == 2]
        rest = [p for p in self.net.parameters() if p.ndim != 2]
        groups = [{"params": decay, "weight_decay": train.weight_decay},
                  {"params": rest, "weight_decay": train.weight_decay if train.decay == "all" else 0.0}]
        options = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}[adamw]
        self.opt = torch.optim.AdamW(groups, lr=train.lr, betas=(train.beta1, train.beta2), eps=train.adam_eps,
                                     **options)

    def step(self, images: torch.Tensor, labels: torch.Tensor, lr: float) -> torch.Tensor:
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        x = images.float() / 255.0  # uint8 NHWC → [0, 1], as LiteNet's step does
        loss = F.cross_entropy(self.net(x), labels, label_smoothing=self.train.label_smoothing)
        loss.backward()
        self.opt.step()
        return loss.detach()
