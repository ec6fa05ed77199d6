"""The handwritten digits shipped in ``sdfgsparse/bench/data`` (see its README): 1,797
images of 8 x 8 pixels, 10 classes; the RigL task's data."""
import gzip
import os

import numpy as np

__all__ = ['load_digits', 'split']

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'digits.csv.gz')


def load_digits():
    """``(X, y)``: pixels scaled to [0, 1] (float32, 1797 x 64) and labels (int64)."""
    with gzip.open(PATH, 'rt') as f:
        table = np.loadtxt(f, delimiter=',', dtype=np.float32)
    return table[:, :-1] / 16.0, table[:, -1].astype(np.int64)


def split(X, y, test_fraction: float = 0.25, seed: int = 0):
    """A seeded, class-stratified train/test split: ``(X_train, y_train, X_test, y_test)``."""
    rng = np.random.default_rng(seed)
    test = np.zeros(y.size, dtype=bool)
    for label in np.unique(y):
        at = np.flatnonzero(y == label)
        test[rng.permutation(at)[:int(round(test_fraction * at.size))]] = True
    return X[~test], y[~test], X[test], y[test]
