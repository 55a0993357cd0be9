"""One litenet-base-shape step (width W, batch B, precision P) for ncu: warm up, then one profiled step."""
import sys, os
sys.path.insert(0, "bench")
import numpy as np
import cupy
from bench_steps_gpu import models, schedule, DATASET
from litenet.model import init_params, override
from litenet.train.cuda.backend import CudaBackend
W, B, P = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
wide = None if len(sys.argv) < 5 else {"on": True, "off": False}[sys.argv[4]]
name, model, train = models([W])[1]
train = override(train, {"batch_size": B, "precision": P})
rng = np.random.default_rng(0)
images = rng.integers(0, 256, (DATASET, 32, 32, 3), dtype=np.uint8)
labels = rng.integers(0, 10, DATASET).astype(np.uint8)
b = CudaBackend(model, train, init_params(model, 0), graph=False, wide=wide)
b.load_dataset(images, labels)
for k, v in b.geometry.gemms.items():
    print(k, v.M, v.N, v.K, "splits", v.splits, "wide", v.wide, "tall", v.tall, file=sys.stderr)
bt, fl, _, lr = schedule(rng, model, train, B, 4)
b.train_steps(bt[:2], lr[:2], flips=fl[:2]); b.fetch_stats()
cupy.cuda.runtime.deviceSynchronize()
cupy.cuda.profiler.start()
b.train_steps(bt[2:3], lr[2:3], flips=fl[2:3])
cupy.cuda.runtime.deviceSynchronize()
cupy.cuda.profiler.stop()
print(b.fetch_stats()["loss"], file=sys.stderr)
