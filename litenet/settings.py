"""What each model and training setting means, in its unit and range: the words `litenet train --help` shows.

One entry per setting of models/*.toml and of the `--flag` that overrides it; the checks that
enforce the ranges live with the dataclasses (litenet/model.py) and name the flag when the user
gave one (litenet/train/cli.py). tests/train/test_settings_help.py holds every setting to an entry.
"""

from __future__ import annotations

from litenet.model import ACTIVATION_MODES, AUGMENTS, DECAY, EMBED_MODES, INIT_MODES, LOSSES, OPTIMIZERS, PRECISIONS, SCHEDULES


def _one_of(choices) -> str:
    return "one of " + ", ".join(choices)


# setting → (what it does, its unit and the values it takes)
SETTINGS = {
    # model (both families unless said)
    "embed": ("MLP: how pixel rows are embedded", _one_of(EMBED_MODES)),
    "input_shift": ("added to the [0, 1] pixels before the network", "-1 to 1"),
    "width": ("channels of the residual stream", "integer ≥ 1"),
    "hidden": ("MLP: hidden units of each block's MLP", "integer ≥ 1"),
    "blocks": ("residual blocks", "integer ≥ 1"),
    "classes": ("outputs of the head", "integer ≥ 2 (10 for CIFAR-10)"),
    "ln_eps": ("LayerNorm's ε in the variance", "> 0"),
    "embed_init": ("MLP: initialisation of the embedding", _one_of(INIT_MODES)),
    "patch": ("Mixer: side of a square patch in pixels", "a side that tiles 32 (2, 4, 8, 16)"),
    "input_scale": ("Mixer: multiplies the pixels before the patch embedding", "> 0 and ≤ 100"),
    "token_hidden": ("Mixer: hidden units of the MLP across patches", "integer ≥ 1"),
    "channel_hidden": ("Mixer: hidden units of the MLP across channels", "integer ≥ 1"),
    # training
    "epochs": ("passes over the training images", "integer ≥ 1"),
    "batch_size": ("images per step", "integer ≥ 1, at most the training images"),
    "lr_base": ("peak learning rate (after warm-up, before the schedule's decay)", "> 0"),
    "optimizer": ("the update rule", _one_of(OPTIMIZERS)),
    "momentum": ("SGD's momentum", "0 ≤ m < 1"),
    "beta1": ("AdamW's first-moment decay", "0 ≤ β1 < 1"),
    "beta2": ("AdamW's second-moment decay", "0 ≤ β2 < 1"),
    "adam_eps": ("AdamW's ε in the denominator", "> 0"),
    "weight_decay": ("decoupled weight decay per unit learning rate", "≥ 0"),
    "decay": ("which tensors weight decay applies to", _one_of(DECAY)),
    "warmup_steps": ("steps of linear warm-up from 0 to --lr-base", "steps, integer ≥ 0"),
    "schedule": ("learning rate after warm-up", _one_of(SCHEDULES)),
    "clip_threshold": ("gradient norm above which a step is clipped", "> 0 (inf: never)"),
    "clip_norm": ("the norm a clipped gradient is scaled to", "> 0"),
    "loss": ("the training loss", _one_of(LOSSES)),
    "margin": ("the margin loss's margin (unused by cross-entropy)", "≥ 0, in logits"),
    "label_smoothing": ("cross-entropy's label smoothing", "0 ≤ s < 1"),
    "seed": ("initialisation, batch order and augmentation draws", "integer ≥ 0"),
    "precision": ("CUDA backend: the matrix products' precision (tf32/bf16 need sm_80+; NumPy: fp32 only)",
                  _one_of(PRECISIONS)),
    "activations": ("CUDA Mixer: keep every block's activations, or recompute them in the backward",
                    _one_of(ACTIVATION_MODES)),
    "augment": ("training augmentation", f"none, or a +-joined choice of {', '.join(AUGMENTS)} (crop+flip)"),
    "crop_padding": ("crop: pixels of zero padding before the random 32 × 32 crop", "pixels, 0 to 16"),
    "cutout_size": ("cutout: side of the square blanked out", "pixels, 1 to 32"),
    "cutmix_prob": ("CutMix: probability that a batch is mixed", "0 to 1"),
}


def help_text(name: str) -> str:
    """`--flag`'s help: what it does and the values it takes; the preset gives the default."""
    meaning, valid = SETTINGS[name]
    return f"{meaning}; {valid} (default: the preset's)"
