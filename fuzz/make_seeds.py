#!/usr/bin/python3
"""Writes the small seed corpora of the onnx, npy, image and idx fuzz targets (fuzz/corpus/<name>/).

Run once with Debian's python3 (python3-numpy, python3-torch, python3-onnx) and a C compiler with stb:
    /usr/bin/python3 fuzz/make_seeds.py
The model seeds are copied from the loader's test corpus and model-zoo instead (fuzz/README.md).
Each seed is a few hundred bytes to a few KB: libFuzzer mutates small inputs fastest.
"""
import gzip
import io
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def out(kind, name, data):
    os.makedirs(os.path.join(ROOT, kind), exist_ok=True)
    with open(os.path.join(ROOT, kind, name), "wb") as f:
        f.write(data)


def npy_seeds():
    rng = np.random.default_rng(1)
    for name, arr in {
        "f4_4d.npy": rng.standard_normal((1, 1, 6, 6)).astype("<f4"),
        "f8_2d.npy": rng.standard_normal((2, 3)).astype("<f8"),
        "f2_1d.npy": rng.standard_normal(5).astype("<f2"),
        "f4_scalar.npy": np.array(1.5, dtype="<f4"),
        "f4_empty.npy": np.zeros((0, 3), dtype="<f4"),
        "f4_fortran.npy": np.asfortranarray(rng.standard_normal((2, 2)).astype("<f4")),
        "i4_unsupported.npy": np.arange(4, dtype="<i4"),
    }.items():
        buf = io.BytesIO()
        np.save(buf, arr)
        out("npy", name, buf.getvalue())
    buf = io.BytesIO()  # format 2.0 (4-byte header length)
    np.lib.format.write_array(buf, rng.standard_normal((1, 2)).astype("<f4"), version=(2, 0))
    out("npy", "f4_v2.npy", buf.getvalue())


def png(width, height, channels, pixels):
    color = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    raw = b"".join(b"\0" + bytes(pixels[y * width * channels:(y + 1) * width * channels]) for y in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def bmp(width, height, pixels):  # 24-bit BGR, bottom-up rows padded to 4 bytes
    row = (width * 3 + 3) & ~3
    data = b"".join(bytes(pixels[(height - 1 - y) * width * 3:(height - y) * width * 3]) +
                    b"\0" * (row - width * 3) for y in range(height))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(data), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(data), 2835, 2835, 0, 0)
    return header + info + data


def jpeg(width, height, channels, pixels):
    """Baseline JPEG through stb_image_write (Debian libstb-dev), compiled on the fly."""
    src = r'''
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  int w = atoi(argv[1]), h = atoi(argv[2]), c = atoi(argv[3]);
  unsigned char* p = malloc(w * h * c);
  if (fread(p, 1, w * h * c, stdin) != (size_t)(w * h * c)) return 1;
  return !stbi_write_jpg(argv[4], w, h, c, p, 75);
}'''
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "j.c"), "w") as f:
            f.write(src)
        subprocess.run(["cc", "-O1", "-o", os.path.join(d, "j"), os.path.join(d, "j.c"), "-lm"], check=True)
        path = os.path.join(d, "out.jpg")
        subprocess.run([os.path.join(d, "j"), str(width), str(height), str(channels), path],
                       input=bytes(pixels), check=True)
        with open(path, "rb") as f:
            return f.read()


def image_seeds():
    # The last byte of each input picks the target channels and size in fuzz_image.cc; these files
    # keep their own last byte, so the fuzzer starts from a mix.
    g = [(x * 37 + y * 11) % 256 for y in range(7) for x in range(5)]
    rgb = [(i * 53) % 256 for i in range(6 * 4 * 3)]
    out("image", "gray_5x7.png", png(5, 7, 1, g))
    out("image", "gray_alpha_3x3.png", png(3, 3, 2, [(i * 29) % 256 for i in range(18)]))
    out("image", "rgb_6x4.png", png(6, 4, 3, rgb))
    out("image", "rgba_4x4.png", png(4, 4, 4, [(i * 17) % 256 for i in range(64)]))
    out("image", "rgb_6x4.bmp", bmp(6, 4, rgb))
    out("image", "rgb_8x8.jpg", jpeg(8, 8, 3, [(i * 7) % 256 for i in range(192)]))
    out("image", "gray_9x5.jpg", jpeg(9, 5, 1, [(i * 13) % 256 for i in range(45)]))


def idx_seeds():
    images = struct.pack(">BBBBIII", 0, 0, 8, 3, 3, 4, 4) + bytes(range(48))
    labels = struct.pack(">BBBBI", 0, 0, 8, 1, 3) + bytes([1, 7, 9])
    out("idx", "images_3x4x4.idx", images)
    out("idx", "labels_3.idx", labels)
    out("idx", "images_3x4x4.idx.gz", gzip.compress(images, mtime=0))
    out("idx", "labels_3.idx.gz", gzip.compress(labels, mtime=0))
    out("idx", "two_members.idx.gz", gzip.compress(labels[:6], mtime=0) + gzip.compress(labels[6:], mtime=0))


def onnx_seeds():
    import torch
    torch.manual_seed(1)
    nn = torch.nn
    models = {
        "conv_relu_pool_dense.onnx": (nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                                    nn.Flatten(), nn.Linear(18, 3), nn.Softmax(dim=1)), (1, 1, 6, 6)),
        "tconv_bn_tanh.onnx": (nn.Sequential(nn.ConvTranspose2d(3, 2, 4, stride=2, padding=1), nn.BatchNorm2d(2),
                                             nn.Tanh()), (1, 3, 2, 2)),
        "conv_avgpool_sigmoid.onnx": (nn.Sequential(nn.Conv2d(1, 2, 3), nn.AvgPool2d(2), nn.Sigmoid()), (1, 1, 6, 6)),
        "leaky_dense.onnx": (nn.Sequential(nn.Flatten(), nn.Linear(4, 2), nn.LeakyReLU(0.2)), (1, 1, 2, 2)),
    }
    for name, (model, shape) in models.items():
        model.eval()
        buf = io.BytesIO()
        torch.onnx.export(model, torch.randn(*shape), buf, opset_version=13, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        out("onnx", name, buf.getvalue())


if __name__ == "__main__":
    for step in sys.argv[1:] or ["npy", "image", "idx", "onnx"]:
        globals()[step + "_seeds"]()
