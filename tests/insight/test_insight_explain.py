"""litenet explain: PNGs for good images, a grey image of odd size, one-line errors for bad files."""

from pathlib import Path

import numpy as np
import pytest
from insight_fixtures import HAND_MODEL, hand_image, hand_params
from PIL import Image

from litenet.cli import main
from litenet.errors import LiteNetError
from litenet.insight.saliency import load_image, saliency

PNG = b"\x89PNG\r\n\x1a\n"


def test_saliency_of_the_hand_network():
    # ∂z0/∂h0 = ∂x = ∂s + ∂x_main = [0.1875, −0.1875] + [0.1875, −0.375] (dz = [1, 0], as in the
    # monitors' hand computation, halved); only pixel 0's red value feeds h0, through We[0] = [2, 1]:
    # ∂z0/∂x[0, 0, 0] = 0.375·2 − 0.5625·1 = 0.1875, and x there is 1.
    z, maps = saliency(hand_params(), hand_image(), HAND_MODEL)
    assert z[0] == pytest.approx([0.5, -0.5])
    assert maps[0, 0, 0] == pytest.approx(0.1875)
    assert np.count_nonzero(maps) == 1


def test_grey_image_of_odd_size_becomes_32_by_32_rgb(tmp_path):
    """(The loading rules are the runtime's, tested in its own suite; this checks explain gets them.)"""
    grey = Image.fromarray(np.add.outer(np.arange(200), np.arange(300)).astype(np.uint8) % 251, mode="L")
    grey.save(tmp_path / "grey.png")
    image = load_image(tmp_path / "grey.png")
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8
    assert np.array_equal(image[..., 0], image[..., 1]) and np.array_equal(image[..., 1], image[..., 2])
    # upscaling (a 7 × 5 image) takes the other filter and still gives 32 × 32
    Image.new("RGBA", (7, 5), (10, 200, 30, 128)).save(tmp_path / "tiny.png")
    assert load_image(tmp_path / "tiny.png").shape == (32, 32, 3)


def test_exif_orientation_is_applied(tmp_path):
    img = Image.new("RGB", (64, 32), (255, 0, 0))
    img.paste((0, 0, 255), (32, 0, 64, 32))  # left red, right blue
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    img.save(tmp_path / "turned.jpg", exif=exif, quality=95)
    image = load_image(tmp_path / "turned.jpg")
    assert image[2, 16, 0] > 200 and image[29, 16, 2] > 200  # red on top, blue at the bottom


def test_bad_files_raise_one_line_errors(tmp_path):
    (tmp_path / "corrupt.png").write_bytes(PNG + b"not really a png")
    with pytest.raises(LiteNetError, match="corrupt.png: "):
        load_image(tmp_path / "corrupt.png")
    with pytest.raises(LiteNetError, match="no such file"):
        load_image(tmp_path / "missing.png")


def test_explain_command(tmp_path, model_dir, dataset, capsys):
    Image.fromarray(dataset.test.images[0]).save(tmp_path / "cifar.png")
    Image.new("L", (300, 200), 90).save(tmp_path / "grey.jpg")
    (tmp_path / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    out = tmp_path / "out"
    code = main(["explain", str(tmp_path / "cifar.png"), str(tmp_path / "corrupt.jpg"), str(tmp_path / "grey.jpg"),
                 "--model", str(model_dir), "--out", str(out), "--grid", "6"])
    captured = capsys.readouterr()
    assert code == 1  # one image failed
    errors = [line for line in captured.err.splitlines() if "error" in line]
    assert len(errors) == 1 and "corrupt.jpg" in errors[0]
    for name in ("cifar.saliency.png", "grey.saliency.png", "grid-6.saliency.png"):
        assert (out / name).read_bytes()[:8] == PNG
    assert "grey.jpg:" in captured.out and "%" in captured.out  # top-3 probabilities of a cross-entropy model


def test_explain_needs_something_to_do(model_dir, capsys):
    assert main(["explain", "--model", str(model_dir)]) == 2  # nothing to explain: a usage error
    assert capsys.readouterr().err.count("\n") == 1


def test_explain_takes_folders_and_globs_as_litenet_infer_does(tmp_path, model_dir, dataset, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    for i in range(2):
        Image.fromarray(dataset.test.images[i]).save(photos / f"p{i}.png")
    (photos / "notes.txt").write_text("not an image")
    Image.fromarray(dataset.test.images[2]).save(tmp_path / "loose-2.png")
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out"
    code = main(["explain", str(photos), str(tmp_path / "loose-*.png"), str(tmp_path / "empty"),
                 "--model", str(model_dir), "--out", str(out)])
    captured = capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["loose-2.saliency.png", "p0.saliency.png", "p1.saliency.png"]
    assert code == 1 and "empty: folder holds no image files" in captured.err  # as litenet-infer says it


def test_explain_and_eval_write_beside_a_run_but_never_into_the_shipped_models(tmp_path, model_dir, dataset):
    from litenet.insight import common
    from litenet.resources import models_dir

    Image.fromarray(dataset.test.images[0]).save(tmp_path / "a.png")
    assert main(["explain", str(tmp_path / "a.png"), "--model", str(model_dir)]) == 0
    assert (model_dir / "explain" / "a.saliency.png").is_file()  # the user's run folder
    assert main(["eval", "--model", str(model_dir)]) == 0
    assert (model_dir / "eval.json").is_file()
    shipped = models_dir() / "litenet-base"
    assert common.output_folder(None, shipped, "eval") == common.RUNS_DIR / "eval" / "litenet-base"
    assert common.output_folder(None, shipped, "explain") == common.RUNS_DIR / "explain" / "litenet-base"
    assert common.output_folder("somewhere", shipped, "eval") == Path("somewhere")  # asked for: allowed


def test_explain_and_eval_take_a_mixer_unchanged(tmp_path, mixer_dir, dataset, capsys):
    Image.fromarray(dataset.test.images[0]).save(tmp_path / "cifar.png")
    out = tmp_path / "out"
    assert main(["explain", str(tmp_path / "cifar.png"), "--model", str(mixer_dir), "--out", str(out)]) == 0
    assert (out / "cifar.saliency.png").read_bytes()[:8] == PNG
    assert main(["eval", "--model", str(mixer_dir), "--out", str(tmp_path / "ev")]) == 0
    assert "test accuracy" in capsys.readouterr().out


def test_mixer_saliency_is_the_input_gradient_times_the_input(mixer_dir, dataset):
    """The Mixer's map is Σ_k (x − shift) · ∂z_pred/∂x from its hand-written backward; one pixel's
    gradient is checked against central differences."""
    from litenet.train import network
    from litenet.weights import load_model

    params, TINY_MIXER = load_model(mixer_dir)[:2]
    params = params.astype(np.float64)
    image = dataset.test.images[:1].astype(np.float64) / 255
    z, maps = saliency(params, image, TINY_MIXER)
    pred, (i, j, k), eps = int(z[0].argmax()), (5, 17, 1), 1e-6

    def logit(delta):
        bumped = image.copy()
        bumped[0, i, j, k] += delta
        return network.forward(params, bumped, TINY_MIXER).z[0, pred]

    dx = network.backward(params, network.forward(params, image, TINY_MIXER), np.eye(10)[[pred]], TINY_MIXER,
                          want_dx=True)[1]
    assert dx[0, i, j, k] == pytest.approx((logit(eps) - logit(-eps)) / (2 * eps), rel=1e-6)
    assert maps[0, i, j] == pytest.approx(float(((image[0, i, j] - TINY_MIXER.input_shift) * dx[0, i, j]).sum()))
