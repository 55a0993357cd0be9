"""The shapes every kernel is tested at, CPU emulator and GPU alike: odd sizes, sizes just past a
tile (64) or a block (256), one row, and split reductions — never only multiples of a block —
and sizes whose rows are 16-byte aligned, so the vector (float4) paths and their ragged edges
run too."""

KERNEL_SHAPES = [
    ("embed_inputs", dict(B=7)),
    ("embed_inputs", dict(B=3, embed="full", shift=0.5)),
    ("embed_inputs", dict(B=21, embed="full")),
    ("embed_forward_rows", dict(B=5, d=20, rows=2)),
    ("embed_forward_rows", dict(B=9, d=64, rows=1, parts=2)),
    ("embed_forward_rows", dict(B=7, d=66, embed="full", shift=0.5, rows=3, parts=2)),
    ("embed_forward_rows", dict(B=3, d=7, rows=4)),
    ("embed_forward_rows", dict(B=4, d=36, rows=1, parts=4)),
    ("embed_forward", dict(B=5, d=20)),
    ("embed_forward", dict(B=70, d=65, embed="full", shift=0.5, splits=3)),
    ("embed_forward", dict(B=1, d=3, splits=7)),
    ("embed_forward", dict(B=70, d=64, splits=5)),
    ("embed_backward", dict(B=37, d=20, splits=2)),
    ("embed_backward", dict(B=9, d=66, embed="full", shift=0.25)),
    ("embed_backward", dict(B=68, d=64, splits=3)),
    ("linear_forward", dict(B=37, n_in=65, n_out=10)),
    ("linear_forward", dict(B=130, n_in=3, n_out=129, splits=1)),
    ("linear_forward", dict(B=1, n_in=300, n_out=7, splits=4)),
    ("linear_forward", dict(B=70, n_in=36, n_out=68, splits=2)),
    ("linear_gelu_forward", dict(B=70, n_in=50, n_out=257)),
    ("linear_gelu_forward", dict(B=3, n_in=200, n_out=33, splits=3)),
    ("linear_gelu_forward", dict(B=66, n_in=64, n_out=132, splits=2)),
    ("linear_backward_input", dict(B=37, n_in=65, n_out=10)),
    ("linear_backward_input", dict(B=100, n_in=17, n_out=300, splits=5)),
    ("linear_backward_input", dict(B=70, n_in=68, n_out=40, splits=2)),
    ("linear_backward_weight", dict(B=37, n_in=65, n_out=10)),
    ("linear_backward_weight", dict(B=300, n_in=63, n_out=70, splits=4)),
    ("linear_backward_weight", dict(B=1, n_in=5, n_out=3)),
    ("linear_backward_weight", dict(B=150, n_in=68, n_out=132, splits=6)),
    ("linear_backward_weight", dict(B=1500, n_in=63, n_out=70, splits=20)),  # split-K in two levels (splitk.cuh)
    ("embed_forward_tall", dict(B=130, d=68, splits=3)),
    ("embed_forward_tall", dict(B=9, d=65, embed="full", shift=0.5)),
    ("embed_backward_tall", dict(B=37, d=20, splits=2)),
    ("linear_forward_tall", dict(B=200, n_in=36, n_out=68, splits=2)),
    ("linear_gelu_forward_tall", dict(B=129, n_in=65, n_out=70)),
    ("linear_backward_input_tall", dict(B=131, n_in=68, n_out=40, splits=3)),
    ("linear_backward_input_tall", dict(B=5, n_in=17, n_out=30)),
    ("linear_backward_weight_tall", dict(B=150, n_in=132, n_out=68, splits=6)),
    ("linear_backward_weight_tall", dict(B=1500, n_in=132, n_out=68, splits=35)),
    ("linear_backward_weight_tall", dict(B=37, n_in=65, n_out=10, splits=1)),
    ("gelu_forward", dict(n=1000)),
    ("gelu_forward", dict(n=7, grid=1)),
    ("gelu_backward", dict(n=1000)),
    ("residual_layernorm_forward", dict(B=13, d=64)),
    ("residual_layernorm_forward", dict(B=9, d=257)),
    ("residual_layernorm_forward", dict(B=1, d=5)),
    ("residual_layernorm_backward", dict(B=13, d=64)),
    ("residual_layernorm_backward", dict(B=300, d=33, splits=3)),
    ("residual_join", dict(n=1000)),
    ("residual_join", dict(n=3, grid=1)),
    ("embed_inputs_with_copy", dict(B=7)),
    ("embed_inputs_with_copy", dict(B=3, embed="full", shift=0.5)),
    ("residual_layernorm_forward_with_copy", dict(B=13, d=64)),
    ("residual_layernorm_forward_with_copy", dict(B=9, d=257)),
    ("residual_layernorm_backward_with_copy", dict(B=300, d=33, splits=3)),
    ("residual_layernorm_backward_with_copy", dict(B=13, d=64)),
    ("residual_join_with_copy", dict(n=1000)),
    ("residual_join_with_copy", dict(n=3, grid=1)),
    ("margin_loss_forward", dict(B=300, C=10)),
    ("margin_loss_forward", dict(B=40, C=3, ties=True)),
    ("margin_loss_backward", dict(B=300, C=10)),
    ("margin_loss_backward", dict(B=40, C=4, ties=True)),
    ("cross_entropy_forward", dict(B=300, C=10)),
    ("cross_entropy_backward", dict(B=37, C=7)),
    ("bf16_copy", dict(n=4099)),
    ("bf16_copy", dict(n=5, grid=1, offset=1)),
    ("grad_norm_sq", dict(width=20, hidden=30, blocks=2)),
    ("grad_norm_sq", dict(width=64, hidden=256)),
    ("grad_norm_clip", dict(width=20, hidden=30, threshold=1.0)),
    ("grad_norm_clip", dict(width=20, hidden=30, threshold=1e6)),
    ("grad_average", dict(width=20, hidden=30, world=3)),
    ("grad_average", dict(width=20, hidden=30, blocks=2, world=2, grid=1)),
    ("sgd_momentum_update", dict(width=20, hidden=30)),
    ("sgd_clip_update", dict(width=20, hidden=30, threshold=1.0)),
    ("sgd_clip_update", dict(width=20, hidden=30, threshold=1e6, blocks=2)),
    ("fused_rows", dict(B=13, d=16, H=40, rows=4)),
    ("fused_rows", dict(B=9, d=33, H=70, blocks=2, rows=3, loss="cross-entropy", C=7)),
    ("fused_rows", dict(B=5, d=64, H=256, rows=1)),
    ("fused_rows", dict(B=20, d=12, H=300, rows=16, C=10)),
    ("fused_weight_grads", dict(B=13, d=16, H=40)),
    ("fused_weight_grads", dict(B=300, d=20, H=70, blocks=2, embed="full", sm_count=16)),
    ("fused_weight_grads", dict(B=130, d=64, H=128, C=12, sm_count=8)),
]


def ids(cases):
    return [f"{name}-" + "-".join(f"{k}{v}" for k, v in shape.items()) for name, shape in cases]

# The embedding's tile products again on the (emulated) tensor cores, each within its precision's
# tolerance (the layers' `_tf32` / `_bf16` products are in mixer_cases.py, which the Mixer added).
KERNEL_SHAPES += [(f"{name}_{p}", shape) for p in ("tf32", "bf16") for name, shape in [
    ("embed_forward", dict(B=5, d=20)),
    ("embed_forward", dict(B=66, d=20, shift=0.5, splits=4)),
    ("embed_backward", dict(B=37, d=20, splits=2)),
    ("embed_backward", dict(B=9, d=66, embed="full", shift=0.25)),
]]  # (small: the emulator's mma is slow; test_cuda_gpu.py runs them at litenet-base's sizes)

# The wide (128 × 128) BF16 products (gemm_wide.cuh): ragged tiles in both directions, a K split into
# uneven ranges, rows not 16-byte aligned (element loads), ∂b through each half's split-K sum; the last
# two have whole aligned tiles inside the operands (the BF16 tiles' plain-load path), with ragged ends.
KERNEL_SHAPES += [
    ("linear_forward_wide_bf16", dict(B=130, n_in=40, n_out=136, splits=2)),
    ("linear_gelu_forward_wide_bf16", dict(B=5, n_in=67, n_out=70)),
    ("linear_backward_input_wide_bf16", dict(B=70, n_in=129, n_out=50)),
    ("linear_backward_weight_wide_bf16", dict(B=90, n_in=65, n_out=130, splits=3)),
    ("linear_backward_weight_wide_bf16", dict(B=37, n_in=10, n_out=7)),
    ("embed_forward_wide_bf16", dict(B=9, d=130, splits=2)),
    ("embed_backward_wide_bf16", dict(B=37, d=20, splits=2)),
    ("linear_backward_input_wide_bf16", dict(B=136, n_in=256, n_out=72)),
    ("linear_backward_weight_wide_bf16", dict(B=72, n_in=128, n_out=136)),
]

# The same products in wide fp32 tiles (256 × 128, 16 × 8 outputs a thread on the SIMT cores), and two
# whose rows reach a second tile row with a ragged second part (rows 128 … 255 of the tile), one of them a
# ∂W whose ∂b comes from the first tile row's top parts only, through a K split.
KERNEL_SHAPES += [(name.removesuffix("_bf16"), shape) for name, shape in KERNEL_SHAPES[-9:]]
KERNEL_SHAPES += [
    ("linear_forward_wide", dict(B=300, n_in=24, n_out=70, splits=3)),
    ("linear_backward_weight_wide", dict(B=40, n_in=390, n_out=130, splits=2)),
]
# Whole aligned fp32 tiles (WideFp32::fetch's plain loads), in each operand layout; the ∂W has a ragged
# second tile column beside its whole first, and ∂b through a K split.
KERNEL_SHAPES += [
    ("linear_forward_wide", dict(B=256, n_in=40, n_out=128)),
    ("linear_backward_input_wide", dict(B=256, n_in=128, n_out=32)),
    ("linear_backward_weight_wide", dict(B=24, n_in=256, n_out=136, splits=2)),
]

# ∂u = (∂y Wᵀ)·GELU'(u) in wide BF16 tiles, with its BF16 copy (BF16 only): ragged and split, and whole tiles.
KERNEL_SHAPES += [
    ("linear_backward_input_gelu_wide_bf16", dict(B=70, n_in=131, n_out=50, splits=2)),
    ("linear_backward_input_gelu_wide_bf16", dict(B=136, n_in=256, n_out=72)),
]

# The wide products at the sizes geometry.choose_wide gives them wide tiles: litenet-base's shape at width
# 1024, batch 1024 (fp32 as named here; test_cuda_precision_gpu.py adds `_bf16`). GPU only: too slow to
# emulate.
WIDE_REAL_SHAPES = [
    ("embed_forward_wide", dict(B=1024, d=1024, embed="full", shift=0.5, splits=1)),
    ("embed_backward_wide", dict(B=1024, d=1024, embed="full", splits=2)),
    ("linear_gelu_forward_wide", dict(B=1024, n_in=1024, n_out=2048)),
    ("linear_forward_wide", dict(B=1024, n_in=2048, n_out=1024, splits=2)),
    ("linear_backward_input_wide", dict(B=1024, n_in=2048, n_out=1024)),
    ("linear_backward_weight_wide", dict(B=1024, n_in=1024, n_out=2048, splits=2)),
]
