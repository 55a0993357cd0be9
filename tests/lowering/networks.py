"""Networks the lowering tests train: small configs of both families, and a network of neither — Mixer
blocks, then MLP blocks on the pooled vector — built as an op list here, with the same op kinds and
parameter naming as litenet.graph (its family is registered for the tests that import this module)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from litenet import graph
from litenet.graph import IMAGES, Op, _layernorm, _product
from litenet.model import MixerConfig, ModelConfig, TrainConfig

SEED_LIKE = ModelConfig(width=16, hidden=40, blocks=2)
BASE_LIKE = ModelConfig(embed="full", input_shift=0.5, width=20, hidden=24, blocks=2, classes=7)
MIXER = MixerConfig(patch=8, width=12, token_hidden=6, channel_hidden=20, blocks=2)
SGD = TrainConfig(batch_size=12, lr_base=0.2, augment="flip")
ADAMW = TrainConfig(batch_size=8, loss="cross-entropy", optimizer="adamw", label_smoothing=0.1, decay="weights",
                    augment="crop+flip+cutout", lr_base=0.01, weight_decay=0.05)


@dataclass(frozen=True)
class MixedConfig:
    """`mixer_blocks` Mixer blocks over P×P patches, the final LayerNorm and the mean over the patches,
    then `mlp_blocks` MLP blocks (fc1 → GELU → fc2, + identity, LayerNorm) on the pooled vector, then a head."""

    family: ClassVar[str] = "test-mixed"
    patch: int = 8
    input_shift: float = 0.5
    input_scale: float = 4.0
    width: int = 12
    token_hidden: int = 6
    channel_hidden: int = 20
    mixer_blocks: int = 4
    mlp_hidden: int = 24
    mlp_blocks: int = 2
    classes: int = 10
    ln_eps: float = 1e-5

    @property
    def tokens(self) -> int:
        return (32 // self.patch) ** 2


def mixed_ops(m: MixedConfig) -> tuple[Op, ...]:
    mixer = MixerConfig(patch=m.patch, input_shift=m.input_shift, input_scale=m.input_scale, width=m.width,
                        token_hidden=m.token_hidden, channel_hidden=m.channel_hidden, blocks=m.mixer_blocks,
                        classes=m.classes, ln_eps=m.ln_eps)
    ops = list(graph.mixer_ops(mixer)[:-1])  # everything but the Mixer's head: up to the pooled vector
    x, c, h = "pool", m.width, m.mlp_hidden
    for i in range(m.mlp_blocks):
        p = f"mlp.{i}"
        ops += [_product("linear", f"{p}.fc1", x, c, h, (h,)), Op("gelu", f"{p}.gelu", (f"{p}.fc1",), (h,)),
                _product("linear", f"{p}.fc2", f"{p}.gelu", h, c, (c,)),
                Op("residual", f"{p}.residual", (x, f"{p}.fc2"), (c,)),
                _layernorm(f"{p}.ln", f"{p}.residual", c, m.ln_eps, (c,))]
        x = f"{p}.ln"
    ops.append(_product("linear", "head", x, c, m.classes, (m.classes,)))
    assert ops[0].inputs == (IMAGES,)
    return tuple(ops)


graph.ARCHITECTURES.setdefault(MixedConfig.family, mixed_ops)
MIXED = MixedConfig()
