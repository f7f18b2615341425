#!/usr/bin/env python3
# Writes a generator's batch as one PNG grid: the same pixels as `infer --model M --out F --batch N
# --seed S`, because the latent z comes from the same seeded generator (Session.random_inputs) and the
# grid from the same writer (infer.save_grid). Run: python3 examples/python/generate.py --out img.png
import argparse
import pathlib

import infer

ROOT = pathlib.Path(__file__).resolve().parents[2]

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--model", default=ROOT / "models" / "ebgan_fashion.fb")
parser.add_argument("--out", default="img.png")
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--backend", default="auto")
args = parser.parse_args()

try:
    session = infer.Session(args.model, backend=args.backend, batch=args.batch)
    z = session.random_inputs(args.seed)          # z ~ N(0, 1), exactly as `infer --seed`
    images = session(*z)                          # [batch, C, H, W], in the model's output range
    infer.save_grid(args.out, images, *session.model.output_range)
except infer.Error as e:
    raise SystemExit(f"error: {e}")
print(f"wrote {args.out}: {images.shape[0]} image(s) {images.shape[1]}x{images.shape[2]}x"
      f"{images.shape[3]} on {session.backend}, seed {args.seed}")
