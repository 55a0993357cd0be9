"""Where a kernel's warps stall, from ncu's per-instruction samples (SourceCounters section):

    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > REPORT.csv
    python3 stall_samples.py REPORT.csv

Each stall reason's share of all samples, split between the k loop (instructions executed at least
half as often as the most executed one) and the rest (prologue, split-K fixup, epilogue), then the
instructions holding the most samples of the main reasons."""
import collections
import csv
import sys

REASONS = ["stall_barrier", "stall_dispatch", "stall_no_inst", "stall_short_sb", "stall_wait", "stall_long_sb",
           "stall_math", "stall_not_selected", "stall_selected", "stall_branch_resolving", "stall_mio", "stall_lg",
           "stall_membar", "stall_drain", "stall_misc"]


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


rows = list(csv.reader(open(sys.argv[1])))
header = rows[1]
data = [r for r in rows[2:] if len(r) == len(header)]
address, source, executed = (header.index(h) for h in ("Address", "Source", "Instructions Executed"))
column = {n: header.index(n) for n in REASONS}
counts = [number(r[executed]) for r in data]
hot = 0.5 * max(counts)
loop, rest = collections.Counter(), collections.Counter()
for r, c in zip(data, counts):
    for n, i in column.items():
        (loop if c >= hot else rest)[n] += number(r[i])
total = sum(loop.values()) + sum(rest.values())
print(f"{sys.argv[1]}: {sum(1 for c in counts if c >= hot)} loop instructions, {total:.0f} samples, "
      f"loop share {sum(loop.values()) / total:.3f}")
for n in REASONS:
    print(f"  {n:24s} loop {loop[n] / total:.3f}  rest {rest[n] / total:.3f}")
for n in ("stall_dispatch", "stall_short_sb", "stall_wait", "stall_no_inst", "stall_membar", "stall_lg"):
    top = sorted(((number(r[column[n]]), r[source].strip()) for r in data), reverse=True)[:5]
    print(n, "; ".join(f"{int(s)} {text[:44]}" for s, text in top))
