"""Writes the digits data sets of the adaptation demo from the 8x8 handwritten digits that ship inside
scikit-learn (``sklearn.datasets.load_digits``: 1,797 images of 8x8 pixels, values 0..16, no download).

Nothing at run time needs scikit-learn: the files are committed. Run (needs the ``demo`` extra):
    .venv/bin/python examples/digits/make_data.py      # deterministic: same bytes every time

Pixels are scaled to [0, 1]. The samples are shuffled once (seed 0) and split:
- ``upright_train.npz`` (1,197 samples): the source domain, for pretraining;
- ``upright_test.npz`` (200): held-out upright digits;
- the other 400 are the target domain, the same digits **rotated by 90 degrees** (counter-clockwise):
  ``rotated_train.npz`` (200) for fine-tuning on the device and ``rotated_test.npz`` (200) held out.
Each file holds ``x`` (N, 1, 8, 8) float32 and ``y`` (N,) int32, the format of ``poet run --data`` and
``--eval-data``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPLITS = {"upright_train": (0, 1197), "upright_test": (1197, 1397), "rotated_train": (1397, 1597)}
ROTATED_TEST = (1597, 1797)


def load() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    order = np.random.default_rng(0).permutation(len(d.target))
    x = (d.images[order] / 16.0).astype(np.float32)[:, None, :, :]
    return x, d.target[order].astype(np.int32)


def rotate(x: np.ndarray) -> np.ndarray:
    """The target domain: every image rotated by 90 degrees counter-clockwise."""
    return np.ascontiguousarray(np.rot90(x, 1, axes=(2, 3)))


def write(out: Path = HERE) -> list[Path]:
    x, y = load()
    written = []
    for name, (a, b) in {**SPLITS, "rotated_test": ROTATED_TEST}.items():
        xs = rotate(x[a:b]) if name.startswith("rotated") else x[a:b]
        path = out / f"{name}.npz"
        np.savez_compressed(path, x=xs, y=y[a:b])
        written.append(path)
    return written


if __name__ == "__main__":
    for p in write():
        print(f"wrote {p}")
