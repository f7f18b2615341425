#!/usr/bin/env python3
# Classifies an image with a classifier model (default: the shipped LeNet-5 on the sample ankle boot)
# and prints the top-5 labels with probabilities, as `infer --input IMAGE` does. The image is read and
# normalised as the model's metadata says (infer.load_image). Run: python3 examples/python/classify.py
import argparse
import pathlib

import numpy as np

import infer

ROOT = pathlib.Path(__file__).resolve().parents[2]

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("image", nargs="?",
                    default=ROOT / "models" / "samples" / "fashion_mnist_test_0000_ankle_boot.png")
parser.add_argument("--model", default=ROOT / "models" / "lenet5_fashion.fb")
args = parser.parse_args()

try:
    model = infer.load(args.model)
    session = infer.Session(model)
    logits = session(infer.load_image(args.image, model))[0]
except infer.Error as e:
    raise SystemExit(f"error: {e}")

if session.nodes[-1]["op"] == "softmax":
    probs = logits
else:
    e = np.exp(logits - logits.max())
    probs = e / e.sum()
labels = model.labels
for rank, c in enumerate(np.argsort(-probs)[:5], 1):
    name = labels[c] if c < len(labels) else str(c)
    print(f"{rank}. {name} ({c})".ljust(26) + f"{probs[c]:.4f}")
