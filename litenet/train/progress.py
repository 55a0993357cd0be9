"""Training progress: a tqdm bar on a terminal, a plain line every few seconds in a log or pipe.

tqdm prints nothing useful into a pipe (`make train 2>&1 | tee log`), and a CPU epoch can take
ten minutes, so off a terminal the loop reports itself in lines: step, rate, loss and the ETA.
"""

from __future__ import annotations

import os
import sys
import time

LINE_EVERY_SECONDS = 10.0
_IMPORTED = time.monotonic()


def process_seconds() -> float:
    """Wall time since this process started: from the kernel's record of its start on Linux (so the
    interpreter's start and every import count), else since this module was imported."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))  # field 22: start time, in ticks
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED


def duration(seconds: float) -> str:
    """1h02m, 4m05s."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class NoBar:
    """--no-progress: only the epoch lines the loop writes."""

    def update(self, n): pass
    def set_postfix(self, **kw): pass
    def write(self, text): print(text, flush=True)
    def close(self): pass


class LineProgress(NoBar):
    """One line on stderr at most every `every` seconds: where the run is, its rate, its loss, its ETA."""

    def __init__(self, total: int, initial: int, steps_per_epoch: int, every: float = LINE_EVERY_SECONDS,
                 clock=time.monotonic, stream=None):
        self.total, self.done, self.per_epoch, self.every = total, initial, max(1, steps_per_epoch), every
        self.clock, self.stream = clock, stream or sys.stderr
        self.started = self.last = clock()
        self.first, self.loss = initial, None

    def update(self, n):
        self.done += n
        now = self.clock()
        if now - self.last >= self.every and self.done < self.total:
            self.last = now
            self._line(now)

    def set_postfix(self, loss=None, **kw):
        self.loss = loss

    def _line(self, now: float) -> None:
        rate = (self.done - self.first) / max(now - self.started, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        epoch, step = divmod(self.done, self.per_epoch)
        loss = f"  loss {self.loss}" if self.loss is not None else ""
        print(f"  epoch {epoch + 1}, step {step}/{self.per_epoch} ({self.done}/{self.total} in all)  "
              f"{rate:.2f} steps/s{loss}  ETA {duration(eta)}", file=self.stream, flush=True)


def progress_bar(total: int, initial: int, steps_per_epoch: int, enabled: bool):
    """tqdm on a terminal, LineProgress elsewhere, NoBar when progress is off."""
    if not enabled:
        return NoBar()
    if not sys.stderr.isatty():
        return LineProgress(total, initial, steps_per_epoch)
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True, leave=False)
