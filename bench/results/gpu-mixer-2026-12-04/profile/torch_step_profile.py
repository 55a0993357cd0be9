"""PyTorch's eager step of the same shape under torch.profiler: its kernels and their times."""
import sys
sys.path.insert(0, "bench")
import numpy as np, torch
from bench_steps_gpu import models, schedule, DATASET, torch_precision
from gpu_torch_twin import TorchTwin
from litenet.model import init_params, override
W, B, P = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
name, model, train = models([W])[1]
train = override(train, {"batch_size": B})
rng = np.random.default_rng(0)
images = rng.integers(0, 256, (DATASET, 32, 32, 3), dtype=np.uint8)
labels = rng.integers(0, 10, DATASET).astype(np.uint8)
bt, fl, _, lr = schedule(rng, model, train, B, 8)
twin = TorchTwin(model, train, init_params(model, 0), images, labels, bt, lr, fl)
ac = torch_precision(P)
with ac:
    for _ in range(3): twin.step()
torch.cuda.synchronize()
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    with ac:
        for _ in range(3): twin.step()
    torch.cuda.synchronize()
print(f"== torch {W} {B} {P} (3 steps)")
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=90))
