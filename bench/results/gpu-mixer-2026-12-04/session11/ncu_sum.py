"""Sum an ncu --csv run by kernel: time (µs) and, where collected, instructions issued."""
import collections
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
name, metric, value = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
time, inst = collections.Counter(), collections.Counter()
for r in rows[1:]:
    kernel = r[name].split("(")[0]
    v = float(r[value].replace(",", ""))
    if r[metric] == "gpu__time_duration.sum":
        time[kernel] += v / 1000
    else:
        inst[kernel] += v
for kernel, us in time.most_common():
    print(f"{us:9.1f} us  {inst[kernel] / 1e6:8.2f} M inst  {kernel}")
print(f"{sum(time.values()):9.1f} us  total")
