# One wide BF16 forward product of width 2048 / batch 1024's step, in ncu's detail sections.
R=$OUT
timeout 300 ncu --clock-control none --profile-from-start off -k regex:linear_gelu_forward_wide_bf16 -c 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  python3 bench/results/gpu-mixer-2026-12-04/profile/ncu_step.py 2048 1024 bf16 > $R/ncu-detail.txt 2>&1
grep -v "^==PROF==" $R/ncu-detail.txt | grep -E "Duration|Throughput|Pipe|Stall|Cycles|Warp|Issue|Occupancy|Registers|Shared|L2|L1|DRAM|Block|Grid|Eligible|Active" | head -90
