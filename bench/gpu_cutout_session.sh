#!/usr/bin/env bash
# One GPU session's queue for the cutout recipe (litenet-mixer-cutout): the jobs named on the command
# line (default: steps peers train), in the order given, logs and JSON of each into DIR —
#   tests    the GPU tests (pytest -m gpu: every kernel against its NumPy twin, whole steps, inference);
#   steps    where a step's time goes (mixer_kernel_times.py) and the step table against PyTorch,
#            with recompute (memory);
#   peers    time to 82 %: PEERS_RUNS (default LiteNet BF16, PyTorch eager and torch.compile) on the
#            same batches and augmentation draws of PEERS_PRESET (default litenet-mixer-cutout;
#            litenet-mixer-cutmix works too), each stopped after its first epoch at ≥ 82 %
#            (bench_mixer_gpu.py train --stop-at), alone on the GPU;
#   graph    the step table against PyTorch's CUDA-graph replay of the same step (bench_steps_gpu.py:
#            the Mixer and litenet-base's shape at widths 256, 1024, 2048), alone;
#   train    `litenet train` of the preset as a user runs it (the CUDA backend, BF16) beside the
#            seeds job (the accuracies count, the seconds do not), then `litenet export --int8`
#            and the infer job;
#   seeds    seeds SEEDS (default 0 2) of litenet-mixer-cutout-b128's recipe, at the same time as
#            each other and the GPU tests;
#   cutmix   seeds CUTMIX_SEEDS (default 0 1 2 3) of litenet-mixer-cutout-b128's recipe with CutMix in
#            place of cutout (augment=crop+flip+cutmix), at the same time as each other and the GPU tests;
#   infer    every way to run the trained model (DIR/litenet-mixer-cutout, from the train job)
#            timed and scored on the test set (bench_infer_mixer_gpu.py --test-data), or without
#            one litenet-mixer with seeded weights timed; alone;
#   profile  Nsight Compute (ncu, where the machine has it) on one launch each of the step's largest
#            products at batch 256, BF16, kernels compiled with source lines (LITENET_NVRTC_LINEINFO):
#            DIR/ncu-K.ncu-rep (everything, --set full), ncu-K.txt (its details page) and
#            ncu-K-source.csv (the source page: stall samples per instruction and line); alone;
#   wide     a wider Mixer (width 256, token MLP 128, channel MLP 1024: 4.4 M parameters) with the
#            same recipe, 100 epochs (gpu_mixer_recipes.sh).
# (Recipe runs keep their own queue.log in a folder of DIR: "queue finished" in DIR/queue.log is this
# queue's.) Needs the full CIFAR-10 at DATA (shared/tools/device-data) for peers, train and wide.
#
# Run it from a copy of the tree that later calls cannot replace while it runs (the copy there is no
# git checkout: take it with tar), and keep the machine busy between calls — it is given back when idle:
#   mkdir -p /root/snap && tar --exclude=./.device-data -cf - . | tar -C /root/snap -xf - && cd /root/snap &&
#   (DATA=/root/cifar10/cifar-10-batches-bin DIR=/root/litenet-cutout setsid nohup bash bench/gpu_cutout_session.sh peers train &)
set -u
DATA=${DATA:-/root/cifar10/cifar-10-batches-bin}
DIR=${DIR:-/root/litenet-cutout}
mkdir -p "$DIR"
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
note() { echo "[$(date -u +%T)] $*" >>"$DIR/queue.log"; }
# The data set may still be arriving (shared/tools/device-data's pieces, in later calls): the jobs
# that read it wait for its `ready` mark, up to 15 minutes.
wait_for_data() {
    local ready tries=0
    ready="$(dirname "$DATA")/ready"
    while [ ! -f "$ready" ] && [ $tries -lt 180 ]; do sleep 5; tries=$((tries + 1)); done
    [ -f "$ready" ] || note "no $ready after 15 minutes"
}
CUTOUT=augment=crop+flip+cutout,cutout_size=16
B128=batch_size=128,lr_base=0.002,warmup_steps=780,weight_decay=0.1  # litenet-mixer-cutout-b128's changes
SEEDS=${SEEDS:-0 2}
CUTMIX_SEEDS=${CUTMIX_SEEDS:-0 1 2 3}
PEERS_PRESET=${PEERS_PRESET:-litenet-mixer-cutout}  # the recipe the peers job races on
PEERS_RUNS=${PEERS_RUNS:-litenet:bf16 torch torch-compile}  # and who races

tests() {
    note "GPU tests"
    python3 -m pytest -q -m gpu tests >"$DIR/gpu-tests.log" 2>&1
    note "done (rc $?): $(tail -1 "$DIR/gpu-tests.log")"
}

steps() {
    note "kernel times and the step table with recompute"
    python3 bench/mixer_kernel_times.py --batch 256 1024 --precision bf16 --out "$DIR/kernel-times.json" \
        >"$DIR/kernel-times.log" 2>&1
    python3 bench/bench_mixer_gpu.py steps --batches 256 1024 --contenders litenet:fp32 litenet:tf32 litenet:bf16 \
        litenet:bf16:recompute torch torch-compile --out "$DIR/steps.json" >"$DIR/steps.log" 2>&1
    note "done (rc $?)"
}

peers() {
    wait_for_data
    note "time to 82 %: $PEERS_PRESET, $PEERS_RUNS"
    # shellcheck disable=SC2086  # PEERS_RUNS is a list
    python3 bench/bench_mixer_gpu.py train --preset "$PEERS_PRESET" --data "$DATA" --epochs 100 \
        --runs $PEERS_RUNS --stop-at 0.82 --targets 0.78 0.80 0.82 \
        --out "$DIR/train-$PEERS_PRESET-peers.json" >"$DIR/train-$PEERS_PRESET-peers.log" 2>&1
    note "done (rc $?)"
}

graph() {
    note "step table against PyTorch's CUDA-graph replay"
    python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --out "$DIR/steps-graph.md" >"$DIR/steps-graph.log" 2>&1
    note "done (rc $?)"
}

train() {
    wait_for_data
    note "litenet train --preset litenet-mixer-cutout --backend cuda --precision bf16, beside the seeds job"
    seeds &
    python3 -m litenet train --preset litenet-mixer-cutout --backend cuda --precision bf16 --data "$DATA" \
        --out "$DIR/litenet-mixer-cutout" --no-progress >"$DIR/cli-train.log" 2>&1
    note "done (rc $?)"
    python3 -m litenet export --weights "$DIR/litenet-mixer-cutout" --int8 --data "$DATA" >"$DIR/export.log" 2>&1
    note "export done (rc $?)"
    wait
    infer
}

# 100-epoch runs NAME-seedS of SETTINGS for each seed S of SEEDS, all at once, beside the GPU tests.
seed_runs() {
    local name=$1 settings=$2 seeds=$3 seed
    wait_for_data
    note "seeds $seeds of $name ($settings) beside the GPU tests"
    for seed in $seeds; do
        DATA=$DATA DIR=$DIR/$name-seed$seed bash bench/gpu_mixer_recipes.sh "$name-seed$seed:100:$settings,seed=$seed" &
    done
    tests &
    wait
    note "seeds of $name done"
}

seeds() { seed_runs b128-wd0.1 "$CUTOUT,$B128" "$SEEDS"; }

cutmix() { seed_runs b128-cutmix "augment=crop+flip+cutmix,$B128" "$CUTMIX_SEEDS"; }

infer() {
    if [ -d "$DIR/litenet-mixer-cutout" ]; then
        note "CUDA fp32/int8, ONNX Runtime, PyTorch: the trained model, timed and scored on the test set, alone"
        python3 bench/bench_infer_mixer_gpu.py --models "$DIR/litenet-mixer-cutout" --test-data "$DATA" \
            --out "$DIR/infer-mixer-cutout.md" >"$DIR/infer-mixer-cutout.log" 2>&1
    else
        note "CUDA fp32/int8 and PyTorch timed on litenet-mixer with seeded weights, alone"
        python3 bench/bench_infer_mixer_gpu.py --repeats 200 --out "$DIR/infer-mixer.md" >"$DIR/infer-mixer.log" 2>&1
    fi
    note "done (rc $?)"
}

PROFILE_KERNELS=${PROFILE_KERNELS:-linear_backward_weight_bf16 linear_gelu_forward_bf16 linear_backward_input_bf16 \
layernorm_backward_join token_linear_backward_weight_bf16}

profile() {
    command -v ncu >/dev/null || { note "profile: no ncu on this machine"; return; }
    note "Nsight Compute: $PROFILE_KERNELS"
    local k
    for k in $PROFILE_KERNELS; do
        LITENET_NVRTC_LINEINFO=1 ncu --kernel-name "$k" --launch-skip 2 --launch-count 1 --set full \
            --import-source yes -f -o "$DIR/ncu-$k" \
            python3 bench/mixer_kernel_times.py --batch 256 --count 1 --repeats 1 >"$DIR/ncu-$k.log" 2>&1
        ncu --import "$DIR/ncu-$k.ncu-rep" --page details >"$DIR/ncu-$k.txt" 2>&1
        ncu --import "$DIR/ncu-$k.ncu-rep" --page source --csv --print-source sass,cuda >"$DIR/ncu-$k-source.csv" 2>&1
    done
    note "done"
}

wide() {
    wait_for_data
    note "wider Mixer, cutout recipe, 100 epochs"
    DATA=$DATA DIR=$DIR/wide bash bench/gpu_mixer_recipes.sh \
        "wide256-cutout16:100:width=256,token_hidden=128,channel_hidden=1024,$CUTOUT"
}

for job in "${@:-steps peers train}"; do
    for one in $job; do "$one"; done
done
note "queue finished"
