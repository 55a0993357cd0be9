"""PyTorch's fp32 products at litenet-base's width 2048, batch 1024 (TF32 off), for ncu: the forward
(x·W), ∂input (∂y·Wᵀ) and ∂W (xᵀ·∂y) of fc1, each once after a warm-up."""
import torch

torch.backends.cuda.matmul.allow_tf32 = False
x = torch.randn(1024, 2048, device="cuda")
W = torch.randn(2048, 4096, device="cuda")
dy = torch.randn(1024, 4096, device="cuda")
run = lambda: (x @ W, dy @ W.t(), x.t() @ dy)  # noqa: E731
run()
torch.cuda.synchronize()
torch.cuda.profiler.start()
run()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
