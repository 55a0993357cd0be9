#!/usr/bin/env bash
# Prints the CuPy extra (cuda11, cuda12 or cuda13) that matches this machine's NVIDIA driver, or
# nothing where there is no NVIDIA GPU. The driver's "CUDA Version" is the newest CUDA it runs.
set -eu
command -v nvidia-smi >/dev/null || exit 0
version=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\)\..*/\1/p' | head -n1)
case "$version" in
  11) echo cuda11 ;;
  12) echo cuda12 ;;
  1[3-9]) echo cuda13 ;;
esac
