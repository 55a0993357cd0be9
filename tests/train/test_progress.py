"""Progress off a terminal: a line every few seconds with the step, rate, loss and ETA (tqdm prints nothing to a pipe)."""

import io
import os
import subprocess
import sys

from litenet.train.progress import LineProgress, NoBar, progress_bar


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_line_every_interval_with_step_rate_loss_and_eta():
    clock, stream = Clock(), io.StringIO()
    bar = LineProgress(total=400, initial=0, steps_per_epoch=100, every=10, clock=clock, stream=stream)
    clock.now = 5
    bar.update(50)
    assert stream.getvalue() == ""  # not yet 10 s
    clock.now = 12
    bar.set_postfix(loss="2.1000")
    bar.update(70)  # 120 steps in 12 s: 10 steps/s, 280 left: 28 s
    assert stream.getvalue() == "  epoch 2, step 20/100 (120/400 in all)  10.00 steps/s  loss 2.1000  ETA 0m28s\n"
    clock.now = 15
    bar.update(10)
    assert stream.getvalue().count("\n") == 1  # the next one 10 s after the last


def test_off_a_terminal_the_loop_gets_lines_and_with_no_progress_none():
    assert isinstance(progress_bar(10, 0, 5, enabled=False), NoBar)
    code = ("import sys\nfrom litenet.train.progress import LineProgress, progress_bar\n"
            "sys.exit(0 if isinstance(progress_bar(10, 0, 5, True), LineProgress) else 1)\n")
    r = subprocess.run([sys.executable, "-c", code], stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": "."})
    assert r.returncode == 0, r.stderr
