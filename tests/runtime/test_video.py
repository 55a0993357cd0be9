"""`litenet-infer --video` on generated clips: frames classified as the still images they show, the
JSON schema, batching, --every, --out, --predecode, --realtime, Ctrl-C, and any model folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from litenet.runtime import cli
from litenet.runtime import video_records as vr
from litenet.runtime.model_files import ModelFiles
from litenet.runtime.onnxruntime_backend import OnnxRuntimeInference

from video_fixtures import REPO, SHIPPED

cv2 = pytest.importorskip("cv2")

FRAME_KEYS = {"schema", "type", "source", "frame", "time_s", "class", "index", "score", "topk", "logits", "backend",
              "precision", "model", "batch", "latency_ms"}
SUMMARY_KEYS = {"schema", "type", "source", "frames", "classified", "failed", "drops", "ended_early", "interrupted",
                "predecoded", "wall_s", "fps", "classify_fps", "cpu_s", "cpu_cores", "cpu_ms_per_frame", "stages", "realtime", "backend",
                "precision", "model", "batch_size", "max_latency_ms", "every", "threads", "out"}


def video(capsys, *argv) -> tuple[int, list[dict], str]:
    """Run `litenet-infer --json --video ...`; (exit status, JSON records, stderr)."""
    code = cli.main(["--json", "--video", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def frames_of(rows):
    return [r for r in rows if r["type"] == "frame"]


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_frames_classify_exactly_as_the_still_images_they_show(capsys, lossless_clip, clip_source, precision):
    images, labels = clip_source
    code, rows, err = video(capsys, lossless_clip, "--model", SHIPPED, "--precision", precision, "--topk", "3")
    assert code == 0, err
    frames = frames_of(rows)
    assert [r["frame"] for r in frames] == list(range(2 * len(images)))
    stills = OnnxRuntimeInference(ModelFiles.locate(SHIPPED), precision).predict(images)
    for r in frames:
        # a lossless clip and an exact 15 × 15 block mean: the model sees the very image
        np.testing.assert_array_equal(np.float32(r["logits"]), stills[r["frame"] // 2])
        assert r["index"] == int(np.argmax(stills[r["frame"] // 2])) and len(r["topk"]) == 3
    if labels is not None:  # real CIFAR-10: the clip's accuracy is the stills' (the known labels)
        right = sum(r["class"] == labels[r["frame"] // 2] for r in frames)
        assert right == 2 * sum(int(np.argmax(z)) == ModelFiles.locate(SHIPPED).classes.index(name)
                                for z, name in zip(stills, labels))


def test_json_schema_of_frames_and_summary(capsys, lossless_clip):
    code, rows, err = video(capsys, lossless_clip, "--model", SHIPPED, "--precision", "int8", "--batch-size", "5")
    assert code == 0
    *frames, summary = rows
    for r in frames:
        assert set(r) == FRAME_KEYS and r["schema"] == vr.SCHEMA == "litenet-video/1" and r["type"] == "frame"
        assert r["source"] == str(lossless_clip) and r["model"] == str(SHIPPED)
        assert r["backend"] == "onnxruntime" and r["precision"] == "int8" and 1 <= r["batch"] <= 5
        assert r["time_s"] == pytest.approx(r["frame"] / 30, abs=1e-4) and 0 < r["score"] <= 1
    assert set(summary) == SUMMARY_KEYS and summary["type"] == "summary"
    assert summary["frames"] == summary["classified"] == 24 and summary["failed"] == summary["drops"] == 0
    assert summary["source"] == {"name": str(lossless_clip), "kind": "file", "fps": 30.0, "frame_count": 24,
                                 "width": 640, "height": 480}
    assert set(summary["stages"]) == {"decode", "resize", "inference", "output"}
    assert summary["stages"]["inference"]["frames"] == 24 and summary["stages"]["decode"]["frames"] == 24
    assert summary["stages"]["inference"]["batches"] >= 5  # 24 frames in batches of at most 5
    assert summary["cpu_s"] > 0 and summary["realtime"] is None and not summary["interrupted"]
    assert "24 frames, 24 classified" in err and "cores" in err  # the human summary on stderr


def test_human_lines(capsys, mp4_clip):
    code = cli.main(["--video", str(mp4_clip), "--model", str(SHIPPED), "--precision", "int8", "--topk", "2"])
    out, err = capsys.readouterr()
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 60 and lines[0].startswith("frame 0 @ 0.000 s: ")
    assert lines[-1].startswith("frame 59 @ 1.967 s: ") and "[onnxruntime int8, batch " in lines[-1]
    assert "error" not in err and "60 frames, 60 classified" in err


def test_a_lossy_clip_mostly_agrees_with_the_stills(capsys, mp4_clip):
    from video_fixtures import clip_images

    code, rows, _ = video(capsys, mp4_clip, "--model", SHIPPED, "--precision", "int8")
    stills = OnnxRuntimeInference(ModelFiles.locate(SHIPPED), "int8").predict(clip_images(30)[0]).argmax(axis=1)
    agree = np.mean([r["index"] == stills[r["frame"] // 2] for r in frames_of(rows)])
    assert code == 0 and agree >= 0.8, agree  # mp4v's loss moves a few borderline frames


def test_every_and_max_frames(capsys, lossless_clip):
    code, rows, _ = video(capsys, lossless_clip, "--model", SHIPPED, "--every", "5", "--max-frames", "17")
    summary = rows[-1]
    assert code == 0 and [r["frame"] for r in frames_of(rows)] == [0, 5, 10, 15]
    assert summary["frames"] == 17 and summary["classified"] == 4 and summary["every"] == 5


def test_no_latency_budget_means_batches_of_one(capsys, lossless_clip):
    code, rows, _ = video(capsys, lossless_clip, "--model", SHIPPED, "--max-latency", "0")
    assert code == 0 and {r["batch"] for r in frames_of(rows)} == {1}
    assert rows[-1]["stages"]["inference"]["batches"] == 24


def test_predecode_gives_the_same_frames_and_times_decode_apart(capsys, lossless_clip):
    _, streamed, _ = video(capsys, lossless_clip, "--model", SHIPPED)
    code, rows, err = video(capsys, lossless_clip, "--model", SHIPPED, "--predecode", "--batch-size", "8",
                            "--video-threads", "2")
    assert code == 0 and "pre-decoded frames in memory" in err
    assert [(r["frame"], r["logits"]) for r in frames_of(rows)] == [(r["frame"], r["logits"]) for r in frames_of(streamed)]
    summary = rows[-1]
    assert summary["predecoded"] and summary["stages"]["decode"]["frames"] == 24
    assert {r["batch"] for r in frames_of(rows)} == {8}


def test_out_writes_every_frame_with_its_label(capsys, lossless_clip, tmp_path):
    out = tmp_path / "annotated.mp4"
    code, rows, _ = video(capsys, lossless_clip, "--model", SHIPPED, "--every", "4", "--out", out)
    assert code == 0 and out.is_file()
    cap = cv2.VideoCapture(str(out))
    assert cap.get(cv2.CAP_PROP_FRAME_COUNT) == 24 and cap.get(cv2.CAP_PROP_FRAME_WIDTH) == 640
    ok, frame = cap.read()
    source = cv2.VideoCapture(str(lossless_clip)).read()[1]
    assert ok and frame[5:20, 2:60].mean() < 100 < source[5:20, 2:60].mean()  # the dark label band
    assert not np.abs(frame[200:280, 200:440].astype(int) - source[200:280, 200:440]).mean() > 10  # the picture stays


def test_out_that_cannot_be_written_is_one_line(capsys, lossless_clip, tmp_path):
    code, rows, err = video(capsys, lossless_clip, "--model", SHIPPED, "--out", tmp_path / "no" / "such" / "dir.mp4")
    assert code == 1 and err.count("error:") == 1 and "cannot be written" in err


def test_realtime_paces_a_file_at_its_frame_rate(capsys, lossless_clip):
    start = time.perf_counter()
    code, rows, err = video(capsys, lossless_clip, "--model", SHIPPED, "--realtime", "--max-frames", "12")
    assert code == 0 and time.perf_counter() - start >= 11 / 30  # frame 11 is due 11/30 s after frame 0
    assert rows[-1]["realtime"]["fps"] == 30.0 and "paced at 30 frames/s" in err


def test_any_model_folder_a_mixer_too(capsys, exported, lossless_clip, clip_source):
    mixer = exported["mixer-8"]
    code, rows, _ = video(capsys, lossless_clip, "--model", mixer, "--precision", "int8", "--max-frames", "6")
    stills = OnnxRuntimeInference(ModelFiles.locate(mixer), "int8").predict(clip_source[0][:3])
    assert code == 0
    for r in frames_of(rows):
        np.testing.assert_array_equal(np.float32(r["logits"]), stills[r["frame"] // 2])


@pytest.mark.parametrize("argv, message", [
    (["img.png", "--video", "clip.mp4"], "not both"),
    (["--out", "x.mp4", "img.png"], "only go with --video"),
    (["--video", "clip.mp4", "--every", "0"], "--every must be at least 1"),
    (["--video", "clip.mp4", "--realtime", "--predecode"], "choose one"),
    ([], "give at least one IMAGE"),
])
def test_usage_errors(capsys, argv, message):
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err


def _as_from_a_terminal() -> None:
    """In the child before it runs: Ctrl-C as a shell leaves it (default, unblocked). A test runner's worker
    may ignore or block SIGINT, and both pass to a child: the stream would then run to its end."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_stops_cleanly_with_a_summary(lossless_clip, tmp_path):
    out = tmp_path / "partial.mp4"
    proc = subprocess.Popen([sys.executable, "-m", "litenet.runtime", "--video", str(lossless_clip), "--model",
                             str(SHIPPED), "--realtime", "--max-latency", "0", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=_as_from_a_terminal)
    first = proc.stdout.readline()  # the clip takes 0.8 s paced: interrupt after its first frame
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    assert first.startswith("frame 0 @ ") and proc.returncode == 130
    assert "(interrupted)" in err and "Traceback" not in err
    classified = 1 + len(rest.splitlines())
    assert "classified" in err and classified < 24
    cap = cv2.VideoCapture(str(out))  # finalised: readable, with the frames read before the stop
    assert cap.isOpened() and cap.get(cv2.CAP_PROP_FRAME_COUNT) >= classified


def test_predecode_checks_memory_before_holding_frames(capsys, lossless_clip, monkeypatch):
    monkeypatch.setattr("litenet.runtime.video.available_memory", lambda: 10 * 640 * 480 * 3)  # room for 5 frames
    code, rows, err = video(capsys, lossless_clip, "--model", SHIPPED, "--predecode")
    assert code == 1 and rows[0]["type"] == "error" and len(frames_of(rows)) == 0
    assert err.count("\n") == 1 and "--predecode would hold 21 MiB of frames, more than half the memory available (9 MiB)" in err and "lower --max-frames" in err
    code, rows, _ = video(capsys, lossless_clip, "--model", SHIPPED, "--predecode", "--max-frames", "4")
    assert code == 0 and len(frames_of(rows)) == 4
