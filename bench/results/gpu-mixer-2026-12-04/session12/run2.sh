# Where the 256 × 128 fp32 tile's time goes: the fp32 step's kernels (width 2048, batch 1024) summed by
# ncu, then one forward (GELU) and one ∂input product in detail, and the inner loop's SASS.
set -x
P=bench/results/gpu-mixer-2026-12-04
ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum,sm__inst_issued.sum --csv \
    python3 $P/profile/ncu_step.py 2048 1024 fp32 > $OUT/ncu-2048-fp32.csv 2>$OUT/ncu-2048-fp32.err
python3 $P/session11/ncu_sum.py $OUT/ncu-2048-fp32.csv
ncu --clock-control none --profile-from-start off -k regex:"linear_gelu_forward_wide|linear_backward_input_wide" -c 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
    --section InstructionStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    python3 $P/profile/ncu_step.py 2048 1024 fp32 > $OUT/ncu-detail.txt 2>&1
grep -E "^  [a-z_]+wide|Duration|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|Stall|Registers Per|Achieved Occ|Bank|L2 Cache Thr|L1/TEX Cache Thr|Compute \(SM\)" $OUT/ncu-detail.txt | head -60
which cuobjdump nvdisasm; ls /usr/local/cuda*/bin 2>/dev/null | head
(cuobjdump -sass .variants/linear_sm90a.cubin || /usr/local/cuda/bin/cuobjdump -sass .variants/linear_sm90a.cubin) > $OUT/linear.sass 2>&1; wc -l $OUT/linear.sass
# with the plain-load fetch (inside the operands): LiteNet's MLP steps
python3 bench/bench_steps_gpu.py --no-mixer --litenet-only --widths 1024 2048 --steps 12 --repeats 3 --out $OUT/steps-plain.md 2>&1 | grep "LiteNet"
