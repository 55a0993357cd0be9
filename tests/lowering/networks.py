"""Networks the lowering tests train: small configs of both families, and a network of neither — Mixer
blocks, then MLP blocks on the pooled vector — as a layer list (litenet.layers)."""

from __future__ import annotations

from litenet.layers import layer
from litenet.model import LayersConfig, MixerConfig, ModelConfig, TrainConfig

SEED_LIKE = ModelConfig(width=16, hidden=40, blocks=2)
BASE_LIKE = ModelConfig(embed="full", input_shift=0.5, width=20, hidden=24, blocks=2, classes=7)
MIXER = MixerConfig(patch=8, width=12, token_hidden=6, channel_hidden=20, blocks=2)
SGD = TrainConfig(batch_size=12, lr_base=0.2, augment="flip")
ADAMW = TrainConfig(batch_size=8, loss="cross-entropy", optimizer="adamw", label_smoothing=0.1, decay="weights",
                    augment="crop+flip+cutout", lr_base=0.01, weight_decay=0.05)


# Four Mixer blocks over 8×8 patches, the final LayerNorm and the mean over the patches, then two MLP
# blocks (fc1 → GELU → fc2, + identity, LayerNorm) on the pooled vector, then the head.
MIXED = LayersConfig(layers=(
    layer("patches", patch=8, input_shift=0.5, input_scale=4.0), layer("embed", width=12),
    *[layer("mixer_block", token_hidden=6, channel_hidden=20) for _ in range(4)],
    layer("layernorm"), layer("mean_tokens"), *[layer("mlp_block", hidden=24) for _ in range(2)], layer("head")))
