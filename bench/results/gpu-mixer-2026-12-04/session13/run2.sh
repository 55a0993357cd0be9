# The fp32 wide tile's multiply-adds in other orders — "serp" (CUTLASS's serpentine: odd rows walk the
# columns backwards) and "jmajor" (columns outer) — against the tree ("held"); then ncu's per-instruction
# stall samples (SourceCounters) of the tree's forward GELU product at width 2048 / batch 1024 (one K
# split) and of its ∂input product at width 1024 / batch 1024 (four splits), to see where the cycles go.
P=bench/results/gpu-mixer-2026-12-04/profile
MODEL=mlp WIDTHS="1024 2048" BATCHES=1024 PRECISIONS=fp32 DIR=$OUT/variants bash bench/kernel_variants.sh \
    "held|-|" "serp|overlay:.variants/serp|" "jmajor|overlay:.variants/jmajor|" "held2|-|" 2>&1 | grep "B= 1024 fp32"
for c in "gelu_forward 2048 0" "backward_input 1024 3"; do set -- $c
  timeout 120 ncu --clock-control none --profile-from-start off -k regex:"linear_$1_wide\$" -s $3 -c 1 \
      --section SourceCounters --section WarpStateStats --section LaunchStats -o $OUT/src-$1-$2 \
      python3 $P/ncu_step.py $2 1024 fp32 > /dev/null 2>&1
  ncu -i $OUT/src-$1-$2.ncu-rep --page source --csv --print-source sass > $OUT/src-$1-$2.csv 2>&1 || \
      ncu -i $OUT/src-$1-$2.ncu-rep --page source --csv > $OUT/src-$1-$2.csv 2>&1
  head -c 600 $OUT/src-$1-$2.csv; echo; wc -c $OUT/src-$1-$2.csv
done
