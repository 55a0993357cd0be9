#!/usr/bin/env bash
# The Raspberry Pi path, checked on x86-64: an arm64 Debian bookworm root file system under qemu
# user-mode emulation, LiteNet's runtime-only wheel installed there from PyPI's aarch64 wheels, and
# `litenet-infer --json` on sample images compared with x86-64, for a Pi 4 (Cortex-A72) and a Pi 5
# (Cortex-A76) profile. Correctness only: emulation says nothing about a Pi's speed.
# Background: docs/runtime.md, "Raspberry Pi (arm64)"; results: bench/results/arm.md (this writes
# bench/results/new/arm.md).
#
#   scripts/arm-check.sh                 # as root; MODEL=<folder> (default models/litenet-base)
#   ARM_REFRESH=1 scripts/arm-check.sh   # rebuild the cached root file system
#
# Environment: MODEL, OUT (the Markdown report), ARM_CACHE (default /var/cache/litenet-arm),
# MIRROR (default: the Debian mirror apt uses), PY (host Python with litenet's test deps).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PY:-$REPO/.venv/bin/python}
[[ "$PY" = /* ]] || PY=$PWD/$PY  # absolute (the runs below cd elsewhere), symlinks kept: a venv's python is one
MODEL=$(realpath -m "${MODEL:-$REPO/models/litenet-base}")
OUT=${OUT:-$REPO/bench/results/new/arm.md}
CACHE=${ARM_CACHE:-/var/cache/litenet-arm}
TARBALL=$CACHE/bookworm-arm64-base.tar.zst
VENV=/opt/litenet  # inside the root file system
# label | QEMU_CPU | cpuinfo file | max clock (kHz)
PROFILES=("Pi 4|cortex-a72|pi4|1800000" "Pi 5|cortex-a76|pi5|2400000")

log() { echo "arm-check: $*" >&2; }
die() { echo "arm-check: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts); run it as root"
[ -x "$PY" ] || die "no Python at $PY; run make install first or set PY="
[ -f "$MODEL/model.onnx" ] && [ -f "$MODEL/model.int8.onnx" ] ||
  die "$MODEL has no model.onnx and model.int8.onnx; run make ship-model, or set MODEL= to a folder written by litenet export --int8"

# --- tools and binfmt (ARM-NOTES 1–2) -------------------------------------------------------------
need=()
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
command -v update-binfmts >/dev/null || need+=(binfmt-support)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v zstd >/dev/null || need+=(zstd)
if ((${#need[@]})); then
  log "installing ${need[*]} with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
[ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64
MIRROR=${MIRROR:-$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

# --- a scratch copy of the root file system --------------------------------------------------------
WORK=$(mktemp -d /var/tmp/litenet-arm.XXXXXX)
ROOT=$WORK/root
cleanup() {
  # Unmount whatever is still mounted under $WORK (ours, or debootstrap's after a failure), deepest
  # first; never delete through a mount that is still there.
  local m
  for m in $(awk -v w="$WORK" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
  if grep -q " $WORK" /proc/mounts; then log "left $WORK in place: something is still mounted under it"
  else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'echo "arm-check: error: line $LINENO: \`$BASH_COMMAND\` failed" >&2' ERR

# Every command inside runs with a clean environment (the host's PIP_* settings must not leak in).
in_root() {
  local cpu=$1; shift
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    QEMU_CPU="$cpu" PIP_CERT=/etc/ssl/certs/host-ca-bundle.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1 OPENBLAS_NUM_THREADS=1 chroot "$ROOT" "$@"
}

build_root() {
  log "building the arm64 root file system from $MIRROR (debootstrap, a few minutes)"
  debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || { tail -5 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
  # pip inside must trust what the host's pip trusts (a proxy here may re-sign TLS).
  cp /usr/local/share/ca-certificates/* "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null || true
  mount -t proc proc "$ROOT/proc"
  in_root cortex-a72 update-ca-certificates >/dev/null
  in_root cortex-a72 python3 -m venv "$VENV"
  umount "$ROOT/proc"
  mkdir -p "$CACHE"
  tar -C "$ROOT" -cf - . | zstd -q -T0 -o "$TARBALL.tmp" && mv "$TARBALL.tmp" "$TARBALL"
  log "cached the root file system as $TARBALL ($(du -h "$TARBALL" | cut -f1))"
}

mkdir -p "$ROOT"
if [ -f "$TARBALL" ] && [ -z "${ARM_REFRESH:-}" ]; then
  log "root file system from the cache $TARBALL"
  zstd -q -dc "$TARBALL" | tar -C "$ROOT" -xf -
else
  build_root
fi
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/host-ca-bundle.crt"
# No /dev bind mount (a slip in cleanup would then reach the host's /dev): the few nodes Python needs.
for node in "null c 1 3" "zero c 1 5" "random c 1 8" "urandom c 1 9"; do
  set -- $node; [ -e "$ROOT/dev/$1" ] || mknod -m 666 "$ROOT/dev/$1" "$2" "$3" "$4"
done

# --- the wheel, the model, the samples -----------------------------------------------------------
log "building the wheel (pip wheel --no-deps .)"
(cd "$REPO" && "$PY" -m pip wheel -q --no-deps . -w "$WORK/wheel" >"$WORK/wheel.log" 2>&1) ||
  { tail -5 "$WORK/wheel.log" >&2; die "pip wheel failed"; }
WHEEL=$(ls "$WORK"/wheel/litenet_nn-*.whl)
mkdir -p "$ROOT/tmp/check/model" "$WORK/samples"
cp "$WHEEL" "$ROOT/tmp/check/"
cp "$MODEL"/model.onnx "$MODEL"/model.int8.onnx "$ROOT/tmp/check/model/"
[ -f "$MODEL/config.json" ] && cp "$MODEL/config.json" "$ROOT/tmp/check/model/"
PYTHONPATH=$REPO "$PY" "$REPO/scripts/arm/make_samples.py" "$WORK/samples"
cp -r "$WORK/samples" "$ROOT/tmp/check/samples"
cp "$REPO/scripts/arm/probe.py" "$ROOT/tmp/check/"

mount -t proc proc "$ROOT/proc"
mkdir -p "$CACHE/pip"
cp -a "$CACHE/pip" "$ROOT/root/.cache-pip"  # downloaded wheels from earlier runs, to spare the network
log "installing $(basename "$WHEEL") with its dependencies from PyPI (aarch64 wheels; about a minute)"
in_root cortex-a72 "$VENV/bin/pip" install -q --cache-dir /root/.cache-pip "/tmp/check/$(basename "$WHEEL")" \
  >"$WORK/pip.log" 2>&1 || { tail -5 "$WORK/pip.log" >&2; die "pip install in the arm64 root failed"; }
cp -a "$ROOT/root/.cache-pip/." "$CACHE/pip/"

# The CPU part of /sys that ONNX Runtime's cpuinfo library reads, as a 4-core Pi has it. Plain files
# in the root's empty /sys (no sysfs is mounted there: the host's would describe the x86 CPU, and
# ONNX Runtime then crashes or misdetects, ARM-NOTES 5). Without them the library gives up and ONNX
# Runtime falls back to the CPU features the kernel reports, which a real Pi never exercises.
fake_sysfs() {
  local cpu=$ROOT/sys/devices/system/cpu i
  mountpoint -q "$ROOT/sys" && die "$ROOT/sys is a mount point; refusing to write into it"
  rm -rf "$ROOT/sys/devices" && mkdir -p "$cpu"
  for f in possible present online; do echo 0-3 >"$cpu/$f"; done
  for i in 0 1 2 3; do
    mkdir -p "$cpu/cpu$i/cpufreq" "$cpu/cpu$i/topology"
    echo "$1" >"$cpu/cpu$i/cpufreq/cpuinfo_max_freq"
    echo 0 >"$cpu/cpu$i/topology/physical_package_id"
    echo 0-3 >"$cpu/cpu$i/topology/core_siblings_list"
    echo "$i" >"$cpu/cpu$i/topology/thread_siblings_list"
  done
}

# Run litenet-infer in the root under one profile; its exit status, JSON and stderr land in $WORK.
run_arm() {  # cpu, cpuinfo file, precision, output name
  local rc=0
  mount --bind "$REPO/scripts/arm/cpuinfo-$2.txt" "$ROOT/proc/cpuinfo"
  in_root "$1" sh -c "cd /tmp/check/samples && $VENV/bin/litenet-infer --json --model /tmp/check/model \
    --precision $3 $(echo $SAMPLES)" >"$WORK/$4.jsonl" 2>"$WORK/$4.err" || rc=$?
  umount "$ROOT/proc/cpuinfo"
  return $rc
}

# --- run: x86-64 here, then each Pi profile under qemu ----------------------------------------------
SAMPLES=$(cd "$WORK/samples" && ls)
for precision in fp32 int8; do
  rc=0
  (cd "$WORK/samples" && PYTHONPATH=$REPO "$PY" -m litenet.runtime --json --model "$MODEL" \
    --precision "$precision" $SAMPLES >"$WORK/x86-$precision.jsonl" 2>"$WORK/x86-$precision.err") || rc=$?
  # 1 is expected (odd-truncated.png); anything else means the reference itself failed
  [ "$rc" -le 1 ] || die "the x86-64 reference run failed ($rc): $(tail -1 "$WORK/x86-$precision.err")"
done

rows=()
notes=()
status=0
for profile in "${PROFILES[@]}"; do
  IFS='|' read -r label cpu short khz <<<"$profile"
  fake_sysfs "$khz"
  mount --bind "$REPO/scripts/arm/cpuinfo-$short.txt" "$ROOT/proc/cpuinfo"
  probe=$(in_root "$cpu" "$VENV/bin/python" /tmp/check/probe.py /tmp/check/model/model.int8.onnx 2>"$WORK/$short-probe.err") ||
    probe="probe failed: $(tail -1 "$WORK/$short-probe.err")"
  warnings=$(grep -c . "$WORK/$short-probe.err" || true)
  first=""
  if [ "$warnings" -gt 0 ]; then first=", first: \`$(head -1 "$WORK/$short-probe.err")\`"; fi
  notes+=("- $label ($cpu): $probe; ONNX Runtime printed $warnings warning line(s)$first")
  if [ "$short" = pi5 ] && unzip -l "$WHEEL" | grep -q "litenet/models/litenet-base/model.onnx"; then
    rc=0  # the wheel carries the shipped model: check that it is found without --model
    shipped=$(in_root "$cpu" sh -c "cd /tmp/check/samples && $VENV/bin/litenet-infer cifar-00-*.png" 2>&1) || rc=$?
    notes+=("- the shipped model inside the wheel (no --model), $label: exit status $rc, \`$shipped\`")
  fi
  umount "$ROOT/proc/cpuinfo"
  for precision in fp32 int8; do
    start=$(date +%s)
    rc=0
    run_arm "$cpu" "$short" "$precision" "$short-$precision" || rc=$?
    notes+=("- $label $precision: exit status $rc (1 expected: odd-truncated.png is refused), $(($(date +%s) - start)) s under emulation")
    if [ "$rc" -gt 1 ]; then
      rows+=("| $label ($cpu) | $precision | - | - | - | - | - | FAIL: exit status $rc ($(tail -1 "$WORK/$short-$precision.err")) |")
      status=1; continue
    fi
    row=$("$PY" "$REPO/scripts/arm/compare_outputs.py" "$WORK/x86-$precision.jsonl" "$WORK/$short-$precision.jsonl" \
      --precision "$precision" --label "$label ($cpu)") || status=1
    rows+=("$row")
  done
done
# `litenet bench-infer` under each profile: it must run on the runtime-only install and label the
# machine as emulated (qemu-user passes QEMU_CPU on); its times are the emulator's, not a Pi's.
benches=()
for profile in "${PROFILES[@]}"; do
  IFS='|' read -r label cpu short khz <<<"$profile"
  fake_sysfs "$khz"
  mount --bind "$REPO/scripts/arm/cpuinfo-$short.txt" "$ROOT/proc/cpuinfo"
  rc=0
  in_root "$cpu" "$VENV/bin/litenet" bench-infer /tmp/check/model --batch 1 8 --loops 5 --warmup 1 --cooldown 0 \
    --quiet >"$WORK/$short-bench.txt" 2>"$WORK/$short-bench.err" || rc=$?
  umount "$ROOT/proc/cpuinfo"
  if ! grep -q '^EMULATED: ' "$WORK/$short-bench.txt"; then
    [ "$rc" = 0 ] && rc=1
    echo "arm-check: the table is not labelled EMULATED" >>"$WORK/$short-bench.err"
  fi
  [ "$rc" = 0 ] || status=1
  benches+=("### $label ($cpu): \`litenet bench-infer /tmp/check/model --batch 1 8 --loops 5 --warmup 1 --cooldown 0\`, exit status $rc" ""
            '```' "$(cat "$WORK/$short-bench.txt" "$WORK/$short-bench.err")" '```' "")
done
# A control: a Pi 5's cpuinfo on a Pi 4's CPU. If ONNX Runtime really reads the profile and picks
# the dot-product int8 kernels a Cortex-A76 has, the emulated A72 must stop it with SIGILL (exit 132).
fake_sysfs 2400000
rc=0
run_arm cortex-a72 pi5 int8 control || rc=$?
notes+=("- control, Pi 5 cpuinfo on a cortex-a72 CPU, int8: exit status $rc ($( [ "$rc" = 132 ] && echo "SIGILL: ONNX Runtime chose the A76's dot-product kernels from the profile, and qemu enforces the A72's instruction set" || echo "no SIGILL: see $OUT's notes; the profile may not steer ONNX Runtime's kernel choice"))")
installed=$(in_root cortex-a72 "$VENV/bin/python" -c "
import importlib.metadata as m, importlib.util as u, platform
names = sorted(d.metadata['Name'].lower() for d in m.distributions())
print(platform.machine(), platform.python_version(), ' '.join(f\"{n}=={m.version(n)}\" for n in names))
print('absent:', ', '.join(x for x in ('onnx', 'cupy', 'tqdm', 'matplotlib', 'torch', 'safetensors') if u.find_spec(x) is None))
")

# --- report ----------------------------------------------------------------------------------------
host=$(PYTHONPATH=$REPO "$PY" -c "import onnxruntime, numpy, PIL; print(f'ONNX Runtime {onnxruntime.__version__}, NumPy {numpy.__version__}, Pillow {PIL.__version__}')")
model_doc=$("$PY" -c "
import json, sys
d = json.load(open(sys.argv[1]))
m, acc = d['model'], d.get('test_accuracy')
shape = ', '.join(f'{k} {v}' for k, v in m.items() if k not in ('classes', 'ln_eps', 'embed_init'))  # any family
print(f\"preset {d.get('preset')}, {d.get('epochs_done')} epoch(s), {shape}\"
      + (f', test accuracy {100 * acc:.2f} %' if acc is not None else ''))" "$MODEL/config.json" 2>/dev/null || echo "no config.json")
mkdir -p "$(dirname "$OUT")"
{
  echo "# arm-check: the Raspberry Pi path under qemu, $(date -u +%F)"
  echo
  echo "Command: \`MODEL=${MODEL#$REPO/} scripts/arm-check.sh\` (what \`make arm-check\` runs). Machine: 2-core AMD EPYC, Debian bookworm"
  echo "x86-64, $(qemu-aarch64-static --version | head -1). Root file system: Debian bookworm arm64 (debootstrap, minbase)."
  echo "Model: $MODEL ($model_doc)."
  echo "Reference: the same images and model on x86-64 here ($host)."
  echo
  echo "Inside the arm64 root (\`pip install $(basename "$WHEEL")\` with its dependencies from PyPI):"
  echo
  echo '```'
  echo "$installed"
  echo '```'
  echo
  echo "Images: $(echo "$SAMPLES" | wc -l) files — $(echo "$SAMPLES" | grep -c '^cifar-') CIFAR-10 test images as PNG, plus"
  echo "$(echo "$SAMPLES" | grep -v '^cifar-' | tr '\n' ' ')(16-bit grey with an EXIF rotation, palette with"
  echo "transparency, CMYK JPEG, a truncated PNG that both sides must refuse)."
  echo
  echo "| profile | precision | images | same class / outcome | max abs Δlogit | max abs Δscore | tolerance | result |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Notes:"
  echo
  printf '%s\n' "${notes[@]}"
  echo
  echo "## \`litenet bench-infer\` under emulation (labelled so; no timing claims: emulation is 150–250× slower than a Pi)"
  echo
  printf '%s\n' "${benches[@]}"
} >"$OUT"
cat "$OUT"
log "report written to $OUT"
exit $status
