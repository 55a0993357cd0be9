"""The monitors on a network small enough to work out by hand (width 2, hidden 1; see conftest).

Hand computation, batch of one image, label 1, margin loss m = 0.3, no momentum, no weight decay:
  forward   h0 = [2, 1];  u = 2·1 + 1·(−2) = 0;  a = GELU(0) = 0;  v = b2 = [0, −1];  s = x + v = [2, 0]
            μ = 1, σ² = 1, rstd = 1/√(1 + 3) = ½;  n = [½, −½];  y = n;  z = y I = [½, −½]
            L = max(0, 0.3 − z1 + z0) = 1.3 (active)  →  ∂z = [+1, −1]
  backward  ∂y = ∂z Iᵀ = [1, −1];  ∂Wc = yᵀ∂z = [[½, −½], [−½, ½]] (norm 1)
            ∂s = rstd (∂n − mean ∂n − n mean(∂n n)) = ½ ([1, −1] − 0 − [½, −½]·½) = [0.375, −0.375]
            ∂a = ∂s W2ᵀ = 0.75;  ∂u = 0.75 · GELU'(0) = 0.375;  ∂x_main = ∂u W1ᵀ = [0.375, −0.75]
  paths     S = ‖∂s‖² = 0.28125,  M = ‖∂x_main‖² = 0.703125,  C = ⟨∂s, ∂x_main⟩ = 0.421875
            projection share of the identity path (S + C)/(S + M + 2C) = 0.703125/1.828125 = 5/13,
            of the main path 8/13;  norm share √S/(√S + √M) = √2/(√2 + √5)
  update    w ← w − 0.1 g:  head.weight ‖Δw‖/‖w‖ = 0.1·1/√2;  fc1.weight 0.1·√0.703125/√5 = 0.0375;
            ln.gamma 0.1·√½/√2 = 0.05;  fc2.weight 0 (∂W2 = aᵀ∂s = 0);  β, b1, bc start at 0: no ratio
"""

import json

import numpy as np
import pytest
from insight_fixtures import HAND_MODEL, hand_image, hand_params

from litenet.train import monitors
from litenet.model import TrainConfig, param_layout
from litenet.train import network
from litenet.train import trainer as trainer_module
from litenet.train.trainer import LoopOptions, Split, TrainData, Trainer

HAND_TRAIN = TrainConfig(epochs=1, batch_size=1, lr_base=25.6, momentum=0.0, weight_decay=0.0, warmup_steps=1,
                         loss="margin", margin=0.3)  # lr = 25.6 × 1 / 256 = 0.1
S, M, C = 0.28125, 0.703125, 0.421875
NAMES = [p.name for p in param_layout(HAND_MODEL)]


def test_backward_splits_the_paths_as_worked_out_by_hand():
    params, labels = hand_params(), np.array([1])
    tape = network.forward(params, hand_image(), HAND_MODEL)
    assert tape.z[0] == pytest.approx([0.5, -0.5])
    _, _, dz = network.loss_and_dlogits(tape.z, labels, "margin", 0.3)
    _, _, blocks = network.backward(params, tape, dz, HAND_MODEL)
    assert blocks[0].ds[0] == pytest.approx([0.375, -0.375])
    assert blocks[0].dx_main[0] == pytest.approx([0.375, -0.75])
    assert network.path_sums(blocks[0]) == pytest.approx((S, M, C))


def test_shares_from_the_three_sums():
    shares = monitors.path_shares([S, M, C])
    assert shares["side_proj"] == pytest.approx(5 / 13) and shares["main_proj"] == pytest.approx(8 / 13)
    assert shares["side_norm"] == pytest.approx(np.sqrt(2) / (np.sqrt(2) + np.sqrt(5)))
    assert shares["side_norm"] + shares["main_norm"] == pytest.approx(1.0)
    # opposite paths: the projection shares leave [0, 1] but still add up to 1
    opposed = monitors.path_shares([4.0, 1.0, -1.5])
    assert opposed["side_proj"] == pytest.approx(2.5 / 2.0) and opposed["main_proj"] == pytest.approx(-0.5 / 2.0)


@pytest.fixture(scope="module")
def hand_run(tmp_path_factory):
    """One training step of the hand network through the real trainer; its folder (shared: read only)."""
    folder = tmp_path_factory.mktemp("hand")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trainer_module, "init_params", lambda model, seed: hand_params())
        split = Split(hand_image(), np.array([1], np.uint8))
        Trainer("hand", HAND_MODEL, HAND_TRAIN, folder, TrainData(split, split, ("a", "b")),
                LoopOptions(progress=False)).run()
    return folder


def test_the_trainer_logs_the_hand_values(hand_run):
    step = [json.loads(line) for line in (hand_run / "metrics.jsonl").read_text().splitlines()][1]
    assert step["loss"] == pytest.approx(1.3) and step["lr"] == pytest.approx(0.1) and not step["clipped"]
    norms = dict(zip(NAMES, step["grad_norms"]))
    assert norms["head.weight"] == pytest.approx(1.0, rel=1e-4)
    assert norms["blocks.0.fc1.weight"] == pytest.approx(np.sqrt(0.703125), rel=1e-4)
    assert step["path"][0] == pytest.approx([S, M, C], rel=1e-4)
    ratio = dict(zip(NAMES, step["update_ratio"]))
    assert ratio["head.weight"] == pytest.approx(0.1 / np.sqrt(2), rel=1e-4)
    assert ratio["blocks.0.fc1.weight"] == pytest.approx(0.0375, rel=1e-4)
    assert ratio["blocks.0.ln.gamma"] == pytest.approx(0.05, rel=1e-4)
    assert ratio["blocks.0.fc2.weight"] == 0.0
    assert ratio["blocks.0.ln.beta"] is None and ratio["head.bias"] is None
    # head.weight after the step: I − 0.1 ∂Wc = [[0.95, 0.05], [0.05, 0.95]]
    assert dict(zip(NAMES, step["weight_norms"]))["head.weight"] == pytest.approx(np.sqrt(1.81), rel=1e-4)
    assert step["update_steps"] == 1


def test_read_run_and_phases(hand_run, tmp_path):
    run = monitors.read_run(hand_run)
    assert run.loss_name == "margin" and run.path.shape == (1, 1, 3)
    assert monitors.path_shares(run.path)["side_proj"][0, 0] == pytest.approx(5 / 13, rel=1e-4)
    assert monitors.per_step_update_ratio(run)[0, NAMES.index("head.weight")] == pytest.approx(0.1 / np.sqrt(2), rel=1e-4)
    rows = monitors.phase_table(run)
    early = [r for r in rows if r["phase"] == "early"][0]
    assert early["steps"] == 1 and early["side_proj"] == pytest.approx(5 / 13, rel=1e-4)
    late = [r for r in rows if r["phase"] == "late"][0]
    assert "last epoch" in late["rule"]  # a loss of 1.3 never gets to 0.5/ln 10 of itself
    assert (hand_run / "gradients.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the trainer drew it


def test_phase_thresholds_for_cross_entropy():
    loss = np.concatenate([np.full(100, 2.3), np.linspace(2.3, 0.3, 200), np.full(100, 0.3)])
    run = monitors.RunLog(folder=None, params=[], loss_name="cross-entropy", steps_per_epoch=100,
                          step=np.arange(400), lr=np.zeros(400), loss=loss, grad_norm=np.zeros(400),
                          clipped=np.zeros(400, bool), grad_norms=np.zeros((400, 0)), path=np.ones((400, 1, 3)),
                          chunk_step=np.zeros(0), chunk_len=np.zeros(0), update_ratio=np.zeros((0, 0)),
                          weight_norms=np.zeros((0, 0)))
    found = monitors.phases(run)
    smooth = monitors.trailing_mean(loss, monitors.PHASE_WINDOW)
    assert np.array_equal(found["early"]["mask"], smooth > 2.0)
    assert np.array_equal(found["late"]["mask"], smooth < 0.5) and found["late"]["mask"][-1]


def test_clip_rate_and_trailing_mean():
    assert monitors.trailing_mean(np.array([1.0, 3.0, 5.0, 7.0]), 2) == pytest.approx([1, 2, 4, 6])
    assert monitors.clip_rate(np.array([True, False, False, True]), 4) == pytest.approx([1, 0.5, 1 / 3, 0.5])
    assert monitors.layer_tensors(NAMES) == [(0, "embed"), (1, "b0.fc1"), (3, "b0.fc2"), (5, "b0.ln γ"), (7, "head")]


def test_figures_script_draws_everything(hand_run, model_dir, dataset, tmp_path, capsys, monkeypatch):
    from litenet.insight import figures

    monkeypatch.setattr(figures, "GRID", 2)
    monkeypatch.setattr(figures, "SAMPLE_TEST_IMAGES", (0,))
    out = tmp_path / "figures"
    assert figures.main(["--model", str(model_dir), "--run", str(hand_run), "--seed-run", str(tmp_path / "none"),
                         "--late-run", str(tmp_path / "none"), "--out", str(out)]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"base-curves.png", "base-gradients.png", "base-confusion.png", "grid-2.saliency.png"} <= names
    assert any(n.startswith("odd-grey-300x200") and n.endswith(".saliency.png") for n in names)
    assert "| early" in capsys.readouterr().out


def test_long_runs_are_drawn_from_a_bounded_number_of_points(tmp_path, monkeypatch):
    """A figure draws each smoothed line from at most LINE_POINTS of its points and a noisy per-step
    series as its range over bins of steps, so a long run redraws in about the time of a short one."""
    from litenet.plotting import pyplot
    from litenet.train import plots

    plt = pyplot()
    if plt is None:
        pytest.skip("needs matplotlib")
    n, chunks = 20_000, 400
    rng = np.random.default_rng(0)
    loss = 2 + rng.standard_normal(n)
    run = monitors.RunLog(
        folder=tmp_path, params=["a.weight", "a.bias", "b.weight", "ln.gamma"], loss_name="cross-entropy",
        steps_per_epoch=100, step=np.arange(n), lr=np.linspace(1, 0, n), loss=loss, grad_norm=rng.random(n) + 0.1,
        clipped=rng.random(n) < 0.01, grad_norms=rng.random((n, 4)) + 0.1, path=rng.random((n, 2, 3)) + 0.1,
        chunk_step=np.arange(49, n, 50), chunk_len=np.full(chunks, 50), update_ratio=rng.random((chunks, 4)),
        weight_norms=rng.random((chunks, 4)),
        epochs=[{"epoch": 0, "step": 100, "test_loss": 2.0, "train_accuracy": 0.1, "test_accuracy": 0.1}])
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    assert plots.plot_training(run, tmp_path / "curves.png") and plots.plot_gradients(run, tmp_path / "gradients.png")
    drawn = [len(line.get_xdata()) for fig in figures for ax in fig.axes for line in ax.get_lines()]
    assert drawn and max(drawn) <= plots.LINE_POINTS + 1
    loss_panel = figures[0].axes[0]
    band = loss_panel.collections[0].get_paths()[0].vertices[:, 1]  # the per-step range, min to max
    assert band.min() == pytest.approx(loss[:n // 20 * 20].min()) and band.max() == pytest.approx(loss.max())
    assert (tmp_path / "gradients.png").read_bytes()[:4] == b"\x89PNG"
