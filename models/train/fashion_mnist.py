"""Minimal reader for the Fashion-MNIST IDX files (gzip + numpy, nothing downloaded).

The Debian package `dataset-fashion-mnist` installs the four files under
/usr/share/datasets/fashion-mnist:

    train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz
    t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz

IDX format: big-endian header, magic = 0x00 0x00 <type> <ndim>, then ndim uint32 sizes,
then the data (type 0x08 = unsigned byte).
"""

import gzip
import os

import numpy as np

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def read_idx(path):
    """Read one (optionally gzip-compressed) IDX file of unsigned bytes into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError("%s: not an IDX file" % path)
    dtype_code, ndim = data[2], data[3]
    if dtype_code != 0x08:
        raise ValueError("%s: IDX type 0x%02x unsupported (only unsigned byte)" % (path, dtype_code))
    shape = tuple(int(v) for v in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    offset = 4 + 4 * ndim
    count = int(np.prod(shape)) if shape else 0
    if len(data) - offset != count:
        raise ValueError("%s: expected %d data bytes, found %d" % (path, count, len(data) - offset))
    return np.frombuffer(data, dtype=np.uint8, count=count, offset=offset).reshape(shape).copy()


def _find(folder, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(folder, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError("%s(.gz) not found in %s" % (stem, folder))


def load(folder=DEFAULT_DIR, split="train"):
    """Return (images uint8 [N,28,28], labels uint8 [N]) for split 'train' or 'test'."""
    prefix = {"train": "train", "test": "t10k"}[split]
    images = read_idx(_find(folder, prefix + "-images-idx3-ubyte"))
    labels = read_idx(_find(folder, prefix + "-labels-idx1-ubyte"))
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise ValueError("inconsistent IDX shapes %s / %s" % (images.shape, labels.shape))
    return images, labels


if __name__ == "__main__":
    import sys
    d = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DIR
    for s in ("train", "test"):
        x, y = load(d, s)
        print(s, x.shape, x.dtype, y.shape, "labels", np.bincount(y, minlength=10).tolist(),
              "pixel mean %.4f" % (x.mean() / 255.0))
