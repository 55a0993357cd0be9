#!/usr/bin/env bash
# Recipe runs of litenet-mixer on one GPU with LiteNet's kernels (BF16), one after another, each a
# `bench/bench_mixer_gpu.py train` run that evaluates the full test set after every epoch and
# records the training seconds to each target accuracy. Logs and JSON go to DIR (default
# /root/litenet-recipes), so a run started in the background (setsid) can be collected by a later
# command. Needs the full CIFAR-10 at DATA.
#
#   DATA=/root/cifar10/cifar-10-batches-bin DIR=/root/litenet-recipes bench/gpu_mixer_recipes.sh NAME:EPOCHS:SETTINGS …
#   e.g. cutout8:100:augment=crop+flip+cutout,cutout_size=8   noaug-wd0.1:40:augment=none,weight_decay=0.1
set -u
DATA=${DATA:-/root/cifar10/cifar-10-batches-bin}
DIR=${DIR:-/root/litenet-recipes}
mkdir -p "$DIR"
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
for spec in "$@"; do
    IFS=: read -r name epochs settings <<<"$spec"
    echo "[$(date -u +%T)] $name: $epochs epochs, ${settings:-preset}" >>"$DIR/queue.log"
    python3 bench/bench_mixer_gpu.py train --data "$DATA" --epochs "$epochs" --runs litenet:bf16 \
        --targets 0.72 0.80 0.82 0.83 0.84 0.85 --set ${settings//,/ } --out "$DIR/train-$name.json" \
        >"$DIR/train-$name.log" 2>&1
    echo "[$(date -u +%T)] $name done (rc $?): $(tail -1 "$DIR/train-$name.log")" >>"$DIR/queue.log"
done
echo "[$(date -u +%T)] queue finished" >>"$DIR/queue.log"
