"""The Studio's image views: a test image (or one of the user's) with its prediction, top 3 and saliency;
the confusion matrix; the images the model gets most wrong. Everything through the hand-written backward."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError
from litenet.insight.confusion import confusion_matrix
from litenet.insight.saliency import class_scores, saliency
from litenet.runtime.images import ImageError, load_image
from litenet.studio.summaries import heat_url, image_url
from litenet.train.network import loss_and_dlogits

GALLERY = 24  # test images offered to pick from
CONFUSION_IMAGES = 2000  # test images behind the confusion matrix and the worst images
WORST = 12
MAX_UPLOAD = 20 * 1024 * 1024  # bytes: a dropped file larger than this is refused before decoding


def gallery(live, page: int = 0) -> list[dict]:
    """GALLERY test images (a seeded draw per page) as thumbnails with their index and true class."""
    n = len(live.data.test_images)
    picks = np.random.default_rng([7, page]).choice(n, size=min(GALLERY, n), replace=False)
    return [{"index": int(i), "url": image_url(live.data.test_images[i]),
             "label": live.data.classes[int(live.data.test_labels[i])]} for i in picks]


def explain(live, image: np.ndarray, label: int | None = None) -> dict:
    """One uint8 (32, 32, 3) image: the class scores, the top 3, and gradient × input for the predicted class."""
    z, maps = saliency(live.params(), image[None], live.model)
    scores, kind = class_scores(z, live.train.loss)
    scores = scores[0]
    top = np.argsort(-scores)[:3]
    return {"image": image_url(image), "saliency": heat_url(image, maps[0]), "score_kind": kind,
            "top": [{"class": live.data.classes[int(c)], "score": float(scores[c])} for c in top],
            "predicted": live.data.classes[int(top[0])],
            "label": None if label is None else live.data.classes[int(label)]}


def explain_test(live, index: int) -> dict:
    """explain() of test image `index`."""
    if not 0 <= index < len(live.data.test_images):
        raise LiteNetError(f"test image {index} does not exist (0 … {len(live.data.test_images) - 1})")
    return {**explain(live, np.asarray(live.data.test_images[index]), int(live.data.test_labels[index])),
            "index": index}


def explain_upload(live, data: bytes, filename: str) -> dict:
    """explain() of a file the user dropped, read exactly as litenet-infer reads images; an unreadable file
    is refused in one line that names it."""
    name = Path(filename or "image").name
    if len(data) > MAX_UPLOAD:
        raise LiteNetError(f"{name}: {len(data):,} bytes; the Studio takes image files of up to {MAX_UPLOAD:,}")
    with tempfile.TemporaryDirectory(prefix="litenet-studio-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            image = load_image(path)
        except ImageError as exc:
            raise LiteNetError(str(exc).replace(str(path), name)) from None
    return {**explain(live, image), "filename": name}


def confusion(live, count: int = CONFUSION_IMAGES) -> dict:
    """The confusion matrix over the first `count` test images, and the WORST of them by loss."""
    images = live.data.test_images[:count]
    labels = np.asarray(live.data.test_labels[:count], np.int64)
    z = live.backend.logits(images).astype(np.float64)
    _, per_image, _ = loss_and_dlogits(z, labels, live.train.loss, live.train.margin, live.train.label_smoothing)
    pred = z.argmax(axis=1)
    worst = np.argsort(-per_image)[:WORST]
    scores, kind = class_scores(z[worst], live.train.loss)
    return {"matrix": confusion_matrix(labels, pred, live.model.classes).tolist(),
            "classes": list(live.data.classes), "images": int(len(labels)),
            "accuracy": float(np.mean(pred == labels)) if len(labels) else 0.0, "score_kind": kind,
            "worst": [{"index": int(i), "url": image_url(images[i]), "label": live.data.classes[int(labels[i])],
                       "predicted": live.data.classes[int(pred[i])], "loss": float(per_image[i]),
                       "score": float(s[pred[i]])} for i, s in zip(worst, scores)]}
