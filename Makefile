# LiteNet — `make help` lists the targets. Every target installs what it needs into $(VENV).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EPOCHS ?=
BACKEND ?= auto
DATA ?=
# A GPU's CuPy extra (cuda11, cuda12, cuda13), guessed from nvidia-smi where there is one.
CUDA_EXTRA ?= $(shell bash scripts/cuda-extra.sh 2>/dev/null)
# The Mixer at the size for the machine: litenet-mixer where a GPU trains it, litenet-mixer-cpu on the
# CPU (litenet train's own default, litenet/train/run.py); PRESET=litenet-base for the MLP.
PRESET ?= $(if $(and $(CUDA_EXTRA),$(filter-out numpy,$(BACKEND))),litenet-mixer,litenet-mixer-cpu)
# Training, export and their reports work in an untracked run folder; only `make ship-model`
# writes the tracked models/litenet-base/.
OUT ?= runs/$(PRESET)

RESUME ?=
FORCE ?=
FULL ?=
LIMIT ?=
data_flag = $(if $(DATA),--data $(DATA),)
epochs_flag = $(if $(EPOCHS),--epochs $(EPOCHS),)
limit_flag = $(if $(LIMIT),--limit $(LIMIT),)
# RESUME=1 continues the run in OUT from its checkpoint; FORCE=1 starts it over (0, no or false: off)
yes = $(filter-out 0 no false,$(1))
run_flags = $(if $(call yes,$(RESUME)),--resume,) $(if $(call yes,$(FORCE)),--force,)

.PHONY: help
help:  ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-20s %s\n", $$1, $$2}'
	@echo "  variables: PRESET=$(PRESET) EPOCHS=<preset's> BACKEND=$(BACKEND) DATA=<search order> OUT=$(OUT)"
	@echo "             RESUME=1 (continue the run in OUT) FORCE=1 (start it over) LIMIT=<all> (training images)"

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# One stamp per extra of pyproject.toml, redone when pyproject.toml changes. A target lists the
# stamp of each extra it needs, so each extra is installed once, whatever mix a target asks for;
# an extra that includes others (dev = train + export + pytest) stamps those too.
$(VENV)/.extra-%: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e ".[$*]"
	@touch $@ $(foreach e,$(includes_$*),$(VENV)/.extra-$(e))
includes_dev := train export video studio studio-test
includes_studio-test := studio train export
includes_studio := train export
extras = $(foreach e,$(1),$(VENV)/.extra-$(e))

.PHONY: install
install: $(call extras,dev)  ## create .venv and install LiteNet with everything the tests need

.PHONY: test
test: $(call extras,dev)  ## (~15 min on 2 CPU cores) run the CPU test suite, a worker per core (GPU tests skip without a GPU)
	$(PY) -m pytest -q -n auto

.PHONY: data
data: $(call extras,train)  ## locate (or download) CIFAR-10 and convert it to memory maps
	$(VENV)/bin/litenet data $(data_flag)

.PHONY: train
train: $(call extras,train $(CUDA_EXTRA)) data  ## (~6 min on 2 CPU cores) train PRESET into OUT=runs/PRESET (BACKEND=auto|numpy|cuda)
	@if [ -z "$(strip $(run_flags))" ] && [ -f $(OUT)/checkpoint.safetensors ]; then \
	  echo "make train: $(OUT) already holds a training run; add RESUME=1 to continue it or FORCE=1 to start over (overwriting it)" >&2; \
	  exit 1; fi
	$(VENV)/bin/litenet train --preset $(PRESET) $(epochs_flag) --backend $(BACKEND) --out $(OUT) $(data_flag) $(limit_flag) $(run_flags)

# Benchmarks write their fresh output here (its files untracked); bench/results/README.md says how a
# figure becomes current: into its topic's page, the output into that page's raw archive.
NEW_RESULTS := bench/results/new

TORCH_VERSION ?= 2.13.0
.PHONY: bench
bench: $(call extras,train) data  ## NumPy backend epoch/step time (MLPs and Mixers) against the same model in PyTorch on this CPU (installs torch)
	$(PY) -m pip install -q "torch==$(TORCH_VERSION)"
	$(PY) bench/bench_cpu.py --threads $$(nproc) --repeats 3 --out $(NEW_RESULTS)/cpu.md $(data_flag)
	$(PY) bench/bench_cpu_mixer.py --threads $$(nproc) --out $(NEW_RESULTS)/cpu-mixer.md $(data_flag)

.PHONY: gradcheck
gradcheck: $(call extras,train)  ## (quick, sampled; FULL=1 the check of record, minutes a preset) finite-difference check of every gradient, for every preset
	@for p in $$($(PY) -c "from litenet.model import preset_names; print(*preset_names())"); do \
	  $(VENV)/bin/litenet gradcheck --preset $$p $(if $(call yes,$(FULL)),--full,) || exit 1; done

# --- Export --- (litenet/export; docs/export.md)
METHOD ?= percentile
CALIB ?= 4096

.PHONY: export-int8
export-int8: $(call extras,train export) data  ## write ONNX fp32 + int8 QDQ, scales, int8 plan (+ TensorRT engine) next to OUT's weights
	$(VENV)/bin/litenet export --weights $(OUT) --int8 --calib $(CALIB) --method $(METHOD) $(data_flag)

.PHONY: export-report
export-report: $(call extras,train export) data  ## measure OUT's export figures (accuracy, ORT peer, latency) into bench/results/new/export-PRESET.md
	$(PY) bench/export_report.py --weights $(OUT) --calib $(CALIB) --out $(NEW_RESULTS)/export-$(PRESET).md $(data_flag)

.PHONY: export-ablation
export-ablation: $(call extras,train export) data  ## score int8 variants (rounding, bias correction) of OUT against fp32 off the test set into bench/results/new/
	$(PY) bench/export_ablation.py --weights $(OUT) --calib $(CALIB) --out $(NEW_RESULTS)/export-ablation-$(PRESET).md $(data_flag)

# --- CUDA --- (litenet/lowering, litenet/train/gpu_backend.py, kernels/; docs/cuda.md)
GPU_VENV_DEPS := $(call extras,dev $(CUDA_EXTRA))

.PHONY: test-gpu
test-gpu: $(GPU_VENV_DEPS)  ## run every GPU test (pytest -m gpu): each kernel vs its twin, steps vs NumPy, graph replay, golden losses
	$(PY) -m pytest -q -m gpu tests

.PHONY: bench-gpu
bench-gpu: $(GPU_VENV_DEPS)  ## time LiteNet's CUDA step vs PyTorch eager and CUDA graph (needs torch) into bench/results/new/
	$(PY) bench/bench_gpu.py --out $(NEW_RESULTS)/gpu.md

.PHONY: bench-steps-gpu
bench-steps-gpu: $(GPU_VENV_DEPS)  ## (~3 min + the Mixer peer's compiling, needs torch) one table: Mixer and litenet-base shape (widths 256/1024/2048) per-step ms, fp32 and TF32/BF16, vs PyTorch CUDA graphs (the Mixer also vs its peer of record: torch.compile in one graph of the whole step), with FLOP/byte floors, into bench/results/new/
	$(PY) bench/bench_steps_gpu.py --out $(NEW_RESULTS)/gpu-steps.md

.PHONY: bench-startup
bench-startup: $(GPU_VENV_DEPS) data  ## (~1-3 min, 1 GPU) a CUDA training process's start to its first step, empty kernel cache vs full (litenet-mixer BF16, litenet-base), and a short litenet train of each, into bench/results/new/
	$(PY) bench/bench_startup_gpu.py --train $(data_flag) --out $(NEW_RESULTS)/startup.md

.PHONY: bench-eval-gpu
bench-eval-gpu: $(GPU_VENV_DEPS)  ## (~2 min, 1 GPU) the trainer's evaluation: 10,000 images at each evaluation batch, wide vs 64 × 64 channel tiles, and whether scoring hides behind training (it did not), JSON into bench/results/new/
	$(PY) bench/bench_eval_gpu.py batches --out $(NEW_RESULTS)/eval-batches.json
	$(PY) bench/bench_eval_gpu.py overlap --out $(NEW_RESULTS)/eval-overlap.json

.PHONY: bench-mixer-gpu
bench-mixer-gpu: $(GPU_VENV_DEPS) data  ## (three whole 100-epoch runs, most of the time PyTorch eager's; needs torch) the Mixer's CUDA step, and the race to 80/82/85/88 % and final accuracy on litenet-mixer-cutmix's recipe, vs PyTorch eager and the peer of record (torch.compile in one CUDA graph of the whole step), BF16 both sides, JSON into bench/results/new/
	$(PY) bench/bench_mixer_gpu.py steps --out $(NEW_RESULTS)/gpu-mixer-steps.json
	$(PY) bench/bench_mixer_gpu.py train $(data_flag) --preset litenet-mixer-cutmix --epochs 100 \
	  --runs litenet:bf16 torch:bf16 torch-graph:bf16 --targets 0.80 0.82 0.85 0.88 --out $(NEW_RESULTS)/gpu-mixer-train.json

.PHONY: compile-kernels
compile-kernels:  ## compile every kernels/*.cu and kernels/reference/*.cu with nvcc for sm_75 and sm_90 (syntax check; NVRTC builds at run time)
	@for f in kernels/*.cu kernels/reference/*.cu; do echo "nvcc $$f"; nvcc -c -std=c++14 -gencode=arch=compute_75,code=sm_75 \
	  -gencode=arch=compute_90,code=sm_90 -o /dev/null $$f || exit 1; done

# --- Data-parallel --- (litenet/train/parallel; docs/parallel.md)
.PHONY: gpu-parallel-check
gpu-parallel-check: $(GPU_VENV_DEPS)  ## (1 GPU, ~30 s) 100 steps plain vs as the only rank of an NCCL group: weights must agree
	$(PY) bench/gpu_parallel_check.py

.PHONY: bench-multigpu
bench-multigpu: $(GPU_VENV_DEPS)  ## (≥ 2 GPUs) N GPUs vs 1 at the same global batch: weights after 100 steps, images/s, scaling efficiency into bench/results/new/
	$(PY) bench/bench_multigpu.py --out $(NEW_RESULTS)/multigpu.md

# --- Insight --- (litenet/insight; docs/insight.md)
INSIGHT_MODEL ?= models/litenet-base
INSIGHT_RUN ?= $(if $(wildcard $(INSIGHT_MODEL)/metrics.jsonl),$(INSIGHT_MODEL),runs/ship-litenet-base)
SEED_RUN ?= runs/insight-seed
LATE_RUN ?= runs/insight-base-10k

$(SEED_RUN)/metrics.jsonl: | $(call extras,train)
	$(VENV)/bin/litenet train --preset litenet-seed --backend numpy --out $(SEED_RUN) --force --no-progress $(data_flag)

# the default preset on 10,000 images for 15 epochs: the quickest way (~5 min) to a loss below 0.5
$(LATE_RUN)/metrics.jsonl: | $(call extras,train)
	$(VENV)/bin/litenet train --preset litenet-base --limit 10000 --epochs 15 --backend numpy --out $(LATE_RUN) --force --no-progress $(data_flag)

.PHONY: insight-figures
insight-figures: $(call extras,train) data $(SEED_RUN)/metrics.jsonl $(LATE_RUN)/metrics.jsonl  ## redraw docs/figures: curves and gradient flow of INSIGHT_RUN, confusion and saliency of INSIGHT_MODEL, SEED_RUN, LATE_RUN
	$(PY) -m litenet.insight.figures --model $(INSIGHT_MODEL) --run $(INSIGHT_RUN) --seed-run $(SEED_RUN) --late-run $(LATE_RUN) --out docs/figures $(data_flag)

.PHONY: insight-experiments
insight-experiments: $(call extras,train) data  ## rerun the seed's lr scan and init comparison on both presets (about 10 min on 2 CPU cores, more when shared); PNGs into docs/figures
	$(VENV)/bin/litenet lr-scan --preset litenet-seed --steps 2343 --out runs/lr-scan-seed $(data_flag)
	$(VENV)/bin/litenet lr-scan --preset litenet-base --lrs 0.003125 0.00625 0.0125 0.025 0.05 0.1 --steps 781 --out runs/lr-scan-base $(data_flag)
	$(VENV)/bin/litenet init-compare --preset litenet-seed --steps 200 --out runs/init-compare-seed $(data_flag)
	$(VENV)/bin/litenet init-compare --preset litenet-base --steps 200 --out runs/init-compare-base $(data_flag)
	for x in lr-scan-seed lr-scan-base init-compare-seed init-compare-base; do cp runs/$$x/$${x%-*}.png docs/figures/$$x.png; done

# --- Studio --- (litenet/studio; docs/studio.md)
STUDIO_PORT ?= 8765
# The Studio trains with the CUDA kernels where `make train` would (the mlp and mixer families), else NumPy.
STUDIO_BACKEND ?= $(if $(and $(CUDA_EXTRA),$(filter-out numpy,$(BACKEND))),cuda,numpy)

.PHONY: studio
studio: $(call extras,studio $(if $(filter cuda,$(STUDIO_BACKEND)),$(CUDA_EXTRA))) data  ## LiteNet Studio: build a network from layers, train it live on CIFAR-10, watch every gradient (a page on 127.0.0.1:STUDIO_PORT)
	$(VENV)/bin/litenet studio --preset $(PRESET) --backend $(STUDIO_BACKEND) --port $(STUDIO_PORT) $(data_flag)

.PHONY: studio-figures
studio-figures: $(call extras,studio-test) data  ## (~10 min on 2 cores) a tour of the Studio in Chromium: compose litenet-mixed-cpu by dragging, save it, train, inspect, look, export; screenshots into docs/figures/studio/
	$(PY) scripts/studio_tour.py --out docs/figures/studio $(data_flag)

.PHONY: bench-studio
bench-studio: $(call extras,studio-test) data  ## (~3 min) the Studio's cost: inspection's share of a litenet-mixer-cpu step, and the page's updates per second while it trains (Chromium), into bench/results/new/studio.md
	$(PY) bench/bench_studio.py --out bench/results/new/studio.md $(data_flag)

# --- Runtime --- (litenet/runtime, litenet-infer; docs/runtime.md)
SHIP_PRESET := litenet-base
SHIP_WORK ?= runs/ship-$(SHIP_PRESET)
# make ship-model RUN=runs/litenet-mixer NAME=litenet-mixer ships a run already trained and exported
# (a GPU's Mixer, say); without RUN it trains and exports litenet-base in SHIP_WORK first.
RUN ?=
NAME ?= $(if $(RUN),$(notdir $(patsubst %/,%,$(RUN))),$(SHIP_PRESET))
SHIP_OUT ?= models/$(NAME)

.PHONY: ship-model
ship-model:  ## copy a finished, exported run (RUN=runs/<preset> NAME=<name>) into models/NAME with a model card of its measured accuracy; without RUN: train + export litenet-base first
	@if [ -n "$(RUN)" ]; then $(PY) scripts/ship_model.py $(RUN) $(SHIP_OUT); exit $$?; fi; \
	if [ -f $(SHIP_WORK)/weights.safetensors ]; then echo "ship-model: reusing the training run in $(SHIP_WORK) (delete it to retrain)"; \
	  else $(MAKE) --no-print-directory train PRESET=$(SHIP_PRESET) OUT=$(SHIP_WORK) || exit 1; fi; \
	$(MAKE) --no-print-directory export-int8 PRESET=$(SHIP_PRESET) OUT=$(SHIP_WORK) && \
	$(PY) scripts/ship_model.py $(SHIP_WORK) $(SHIP_OUT)

.PHONY: bench-infer-cpu
bench-infer-cpu: $(call extras,train export) data  ## time ONNX Runtime fp32/int8 (ours, quantize_static) vs PyTorch eager (needs torch) and litenet-infer's start-up into bench/results/new/
	nice -n 10 $(PY) bench/bench_infer_cpu.py --model models/$(SHIP_PRESET) --out $(NEW_RESULTS)/infer-cpu.md

.PHONY: arm-check
arm-check: $(call extras,train) data  ## (root; 4 min, 20 the first time) the Raspberry Pi path under qemu: arm64 Debian, runtime wheel from PyPI, Pi 4 + Pi 5 vs x86-64
	MODEL=$(if $(MODEL),$(MODEL),models/$(SHIP_PRESET)) PY=$(PY) scripts/arm-check.sh

.PHONY: bench-infer-tool
bench-infer-tool: $(call extras,video)  ## (~1 min) litenet bench-infer and litenet-infer --video on a 640x480 30 fps test clip here, targets checked, into bench/results/new/ (the page of record: bench/results/infer-tool.md; GPU machine: bench/infer_tool_session.sh)
	$(PY) bench/infer_tool_session.py --raw bench/results/new/infer-bench-cpu --page bench/results/new/infer-bench-cpu.md

# --- Inference GPU --- (litenet/runtime/cuda_*.py, kernels/infer_*.cu; docs/runtime.md "CUDA backend")
INFER_MODELS ?= models/$(SHIP_PRESET)

.PHONY: test-infer-gpu
test-infer-gpu: $(GPU_VENV_DEPS)  ## run the CUDA inference GPU tests (pytest -m gpu tests/runtime_cuda): fp32 vs ONNX Runtime, int8 vs the plan, batch 1…1000
	$(PY) -m pytest -q -m gpu tests/runtime_cuda

.PHONY: bench-infer
bench-infer: $(GPU_VENV_DEPS)  ## time LiteNet CUDA inference fp32/int8 vs PyTorch eager (batch-1 latency, batch-4096 throughput; needs torch) into bench/results/new/
	$(PY) bench/bench_infer_gpu.py --models $(INFER_MODELS) --out $(NEW_RESULTS)/infer-gpu.md

.PHONY: bench-infer-mixer
bench-infer-mixer: $(GPU_VENV_DEPS)  ## (~3 min, needs torch) the Mixer's CUDA inference: int8 vs fp32 batch-4096 throughput, batch-1 latency vs PyTorch eager and torch.compile reduce-overhead, the one-launch forward vs the launch per op, into bench/results/new/
	$(PY) bench/bench_infer_mixer_gpu.py --out $(NEW_RESULTS)/infer-mixer-gpu.md

.PHONY: bench-mixer-phases
bench-mixer-phases: $(GPU_VENV_DEPS)  ## (~1 min) where the Mixer's one-launch forward spends its time: each phase's work and each grid barrier, from marks the kernel takes when built with LITENET_PHASE_TIMES, into bench/results/new/
	$(PY) bench/mixer_phase_times.py --out $(NEW_RESULTS)/mixer-phase-times.md
