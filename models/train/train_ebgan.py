#!/usr/bin/env python3
"""Train a small EB-GAN (Zhao, Mathieu & LeCun, 2016) on Fashion-MNIST at 64x64 grayscale; export the generator.

Energy-based GAN: the discriminator D is an auto-encoder and its energy is the reconstruction error,
    D(x) = mean over pixels of (Dec(Enc(x)) - x)^2                  (per-sample, per-pixel mean MSE)
    L_D  = D(x) + max(0, m - D(G(z)))                                (margin / hinge loss)
    L_G  = D(G(z)) + lambda_PT * PT(Enc(G(z)))                       (pulling-away term, lambda_PT = 0.1)
    PT(S) = 1/(N(N-1)) * sum_{i != j} (s_i . s_j / (|s_i| |s_j|))^2  over the batch's flattened codes

Data: the 60,000 training images, scaled to [-1,1] ((p/255-0.5)/0.5) and resized 28x28 -> 64x64 bilinearly.
z ~ N(0, 1), shape [N,100,1,1].

Generator (only ops that infer implements; C = --widths, default 512,256,128,64):
  z [N,100,1,1]
  tconv1 ConvTranspose2d(100 -> C1, k4 s1 p0, no bias) -> bn1 -> ReLU        4x4
  tconv2 ConvTranspose2d(C1 -> C2, k4 s2 p1, no bias) -> bn2 -> ReLU         8x8
  tconv3 ConvTranspose2d(C2 -> C3, k4 s2 p1, no bias) -> bn3 -> ReLU         16x16
  tconv4 ConvTranspose2d(C3 -> C4, k4 s2 p1, no bias) -> bn4 -> ReLU         32x32
  tconv5 ConvTranspose2d(C4 -> 1,  k4 s2 p1, bias)    -> Tanh                64x64

Discriminator (auto-encoder, the paper's 64x64 layout, training only, not exported):
  Enc: conv 1->64 k4s2p1, LReLU(0.2); conv 64->128 k4s2p1, BN, LReLU; conv 128->256 k4s2p1, BN, LReLU (code 256x8x8)
  Dec: tconv 256->128 k4s2p1, BN, ReLU; tconv 128->64 k4s2p1, BN, ReLU; tconv 64->1 k4s2p1 (linear output)

Export folder (--out):
  <state_dict key>.npy   every generator parameter and BN buffer (running_mean/var), float32, PyTorch layout
                         (ConvTranspose2d weight is [Cin, Cout, kh, kw]); num_batches_tracked is skipped
  manifest.json          layers, widths, BN eps, seed, epochs, wall time, device, final losses, hyper-parameters
  z.npy                  float32 [8,100,1,1] from torch.Generator (CPU) seeded with --seed
  images.npy             float32 [8,1,64,64]: the generator in eval mode on z.npy, CPU float32
  samples.png            8x8 grid of 64 eval-mode samples (z.npy's 8 are the first row)
  samples_epochNNN.png   progress grids (eval mode, same 64 z), every --grid-every epochs
  train_log.txt          the printed log

Example:
  python3 models/train/train_ebgan.py --data .data/fashion-mnist --out .data/trained/ebgan
"""

import argparse
import json
import os
import struct
import sys
import time
import zlib

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402

NZ = 100
BN_EPS = 1e-5
BN_MOMENTUM = 0.1


class Generator(nn.Module):
    def __init__(self, widths=(512, 256, 128, 64), nz=NZ, out_ch=1):
        super().__init__()
        c1, c2, c3, c4 = widths
        self.tconv1 = nn.ConvTranspose2d(nz, c1, 4, 1, 0, bias=False)
        self.bn1 = nn.BatchNorm2d(c1, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.tconv2 = nn.ConvTranspose2d(c1, c2, 4, 2, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c2, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.tconv3 = nn.ConvTranspose2d(c2, c3, 4, 2, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c3, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.tconv4 = nn.ConvTranspose2d(c3, c4, 4, 2, 1, bias=False)
        self.bn4 = nn.BatchNorm2d(c4, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.tconv5 = nn.ConvTranspose2d(c4, out_ch, 4, 2, 1, bias=True)

    def forward(self, z):
        x = F.relu(self.bn1(self.tconv1(z)))
        x = F.relu(self.bn2(self.tconv2(x)))
        x = F.relu(self.bn3(self.tconv3(x)))
        x = F.relu(self.bn4(self.tconv4(x)))
        return torch.tanh(self.tconv5(x))


class AutoEncoderD(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(1, 64, 4, 2, 1), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(64, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(128, 256, 4, 2, 1, bias=False), nn.BatchNorm2d(256), nn.LeakyReLU(0.2, inplace=True))
        self.dec = nn.Sequential(
            nn.ConvTranspose2d(256, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
            nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.ConvTranspose2d(64, 1, 4, 2, 1))

    def forward(self, x):
        """Return (per-sample energy [N], code [N, 256*8*8])."""
        code = self.enc(x)
        rec = self.dec(code)
        energy = (rec - x).pow(2).flatten(1).mean(1)
        return energy, code.flatten(1)


def pulling_away(code):
    n = code.shape[0]
    s = code / (code.norm(dim=1, keepdim=True) + 1e-8)
    sim = s @ s.t()
    return (sim.pow(2).sum() - sim.diagonal().pow(2).sum()) / (n * (n - 1))


def init_weights(m):
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def write_png_gray(path, img_u8):
    """Write a 2-D uint8 array as an 8-bit grayscale PNG (zlib only, no PIL needed)."""
    h, w = img_u8.shape
    raw = b"".join(b"\x00" + img_u8[r].tobytes() for r in range(h))

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data +
                struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
           chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def save_grid(path, images, nrow=8, pad=2):
    """images: float tensor [N,1,H,W] in [-1,1] -> PNG grid (white padding)."""
    x = images.detach().float().cpu().clamp(-1, 1).add(1).mul(127.5).round().to(torch.uint8).numpy()
    n, _, h, w = x.shape
    ncol = (n + nrow - 1) // nrow
    grid = np.full((ncol * (h + pad) + pad, nrow * (w + pad) + pad), 255, dtype=np.uint8)
    for i in range(n):
        r, c = divmod(i, nrow)
        grid[pad + r * (h + pad): pad + r * (h + pad) + h, pad + c * (w + pad): pad + c * (w + pad) + w] = x[i, 0]
    write_png_gray(path, grid)


def load_real(folder, device, limit=0, size=64, chunk=10000):
    x_u8, _ = fashion_mnist.load(folder, "train")
    if limit:
        x_u8 = x_u8[:limit]
    out = torch.empty((x_u8.shape[0], 1, size, size), dtype=torch.float32, device=device)
    for i in range(0, x_u8.shape[0], chunk):
        x = torch.from_numpy(x_u8[i:i + chunk]).to(device).float().div_(255.0).sub_(0.5).div_(0.5).unsqueeze(1)
        out[i:i + chunk] = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).clamp_(-1, 1)
    return out


class Tee:
    def __init__(self, path):
        self.f = open(path, "w")

    def __call__(self, msg):
        print(msg, flush=True)
        self.f.write(msg + "\n")
        self.f.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=fashion_mnist.DEFAULT_DIR, help="folder with the IDX .gz files")
    ap.add_argument("--out", required=True, help="export folder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=14)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--widths", default="512,256,128,64", help="generator channel widths C1..C4")
    ap.add_argument("--margin", type=float, default=0.1, help="m, in units of per-pixel mean MSE on [-1,1] images")
    ap.add_argument("--lambda-pt", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--beta1", type=float, default=0.5)
    ap.add_argument("--max-minutes", type=float, default=0.0,
                    help="stop after the epoch during which training time passes this (0: off)")
    ap.add_argument("--grid-every", type=int, default=5)
    ap.add_argument("--log-every", type=int, default=200)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--limit-train", type=int, default=0, help="use only the first N training images (testing)")
    args = ap.parse_args()
    widths = tuple(int(v) for v in args.widths.split(","))
    assert len(widths) == 4

    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    log = Tee(os.path.join(args.out, "train_log.txt"))

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    dev = torch.device(args.device)
    device_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    log("torch %s, device %s, args %s" % (torch.__version__, device_name, vars(args)))

    real = load_real(args.data, dev, args.limit_train)
    n = real.shape[0]
    log("real images %s in [%.3f, %.3f]" % (tuple(real.shape), real.min().item(), real.max().item()))

    G = Generator(widths).to(dev)
    D = AutoEncoderD().to(dev)
    G.apply(init_weights)
    D.apply(init_weights)
    n_g = sum(p.numel() for p in G.parameters())
    log("generator params %d (%.2f MB fp16), discriminator params %d" %
        (n_g, 2 * n_g / 1e6, sum(p.numel() for p in D.parameters())))
    opt_g = torch.optim.Adam(G.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=args.lr, betas=(args.beta1, 0.999))

    cpu_gen = torch.Generator().manual_seed(args.seed)                 # data order (CPU)
    z_gen = torch.Generator(device=dev).manual_seed(args.seed + 1)     # training noise
    z_fixed = torch.randn(64, NZ, 1, 1, generator=torch.Generator().manual_seed(args.seed))  # test vectors / grid

    def eval_grid(path):
        G.eval()
        with torch.no_grad():
            save_grid(path, G(z_fixed.to(dev)))
        G.train()

    t_train = time.time()
    step = 0
    epochs_done = 0
    final = {}
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(n, generator=cpu_gen).to(dev)
        acc = torch.zeros(5, device=dev)
        nb = 0
        for i in range(0, n - args.batch + 1, args.batch):   # drop the last partial batch
            xr = real[perm[i:i + args.batch]]
            z = torch.randn(args.batch, NZ, 1, 1, device=dev, generator=z_gen)
            fake = G(z)

            # --- D step: L_D = D(x) + max(0, m - D(G(z)))
            e_real, _ = D(xr)
            e_fake_d, _ = D(fake.detach())
            loss_d = e_real.mean() + F.relu(args.margin - e_fake_d).mean()
            opt_d.zero_grad(set_to_none=True)
            loss_d.backward()
            opt_d.step()

            # --- G step: L_G = D(G(z)) + lambda_PT * PT(Enc(G(z)))
            e_fake, code = D(fake)
            pt = pulling_away(code)
            loss_g = e_fake.mean() + args.lambda_pt * pt
            opt_g.zero_grad(set_to_none=True)
            loss_g.backward()
            opt_g.step()

            acc += torch.stack([loss_d.detach(), loss_g.detach(), e_real.mean().detach(),
                                e_fake.mean().detach(), pt.detach()])
            nb += 1
            step += 1
            if args.log_every and step % args.log_every == 0:
                v = (acc / nb).tolist()
                log("epoch %3d step %6d  L_D %.4f  L_G %.4f  D(x) %.4f  D(G(z)) %.4f  PT %.4f  (%.1f s)" %
                    (epoch, step, v[0], v[1], v[2], v[3], v[4], time.time() - t_train))
        v = (acc / max(nb, 1)).tolist()
        final = {"loss_d": v[0], "loss_g": v[1], "energy_real": v[2], "energy_fake": v[3], "pt": v[4]}
        epochs_done = epoch
        log("== epoch %3d done: L_D %.4f  L_G %.4f  D(x) %.4f  D(G(z)) %.4f  PT %.4f  (%.1f s)" %
            (epoch, v[0], v[1], v[2], v[3], v[4], time.time() - t_train))
        if args.grid_every and epoch % args.grid_every == 0:
            eval_grid(os.path.join(args.out, "samples_epoch%03d.png" % epoch))
        if args.max_minutes and time.time() - t_train > 60 * args.max_minutes:
            log("time limit reached after epoch %d" % epoch)
            break
    train_s = time.time() - t_train

    # ---- export: generator in eval mode, CPU float32 ----
    G = G.cpu().float().eval()
    params = []
    for key, t in G.state_dict().items():
        if key.endswith("num_batches_tracked"):
            continue
        a = t.detach().numpy().astype(np.float32)
        np.save(os.path.join(args.out, key + ".npy"), a)
        params.append({"name": key, "shape": list(a.shape), "dtype": "float32", "file": key + ".npy"})
    with torch.no_grad():
        z8 = z_fixed[:8].clone()
        img8 = G(z8)
        img64 = G(z_fixed)
        G.train()
        img64_train = G(z_fixed)   # batch-statistics BN, for comparison only
        G.eval()
    np.save(os.path.join(args.out, "z.npy"), z8.numpy().astype(np.float32))
    np.save(os.path.join(args.out, "images.npy"), img8.numpy().astype(np.float32))
    save_grid(os.path.join(args.out, "samples.png"), img64)
    save_grid(os.path.join(args.out, "samples_trainmode_bn.png"), img64_train)

    c1, c2, c3, c4 = widths
    layers = [
        {"name": "tconv1", "op": "conv_transpose2d", "in": NZ, "out": c1, "kernel": 4, "stride": 1, "padding": 0,
         "bias": False, "out_hw": 4},
        {"name": "bn1", "op": "batchnorm2d", "channels": c1, "eps": BN_EPS},
        {"op": "relu"},
        {"name": "tconv2", "op": "conv_transpose2d", "in": c1, "out": c2, "kernel": 4, "stride": 2, "padding": 1,
         "bias": False, "out_hw": 8},
        {"name": "bn2", "op": "batchnorm2d", "channels": c2, "eps": BN_EPS},
        {"op": "relu"},
        {"name": "tconv3", "op": "conv_transpose2d", "in": c2, "out": c3, "kernel": 4, "stride": 2, "padding": 1,
         "bias": False, "out_hw": 16},
        {"name": "bn3", "op": "batchnorm2d", "channels": c3, "eps": BN_EPS},
        {"op": "relu"},
        {"name": "tconv4", "op": "conv_transpose2d", "in": c3, "out": c4, "kernel": 4, "stride": 2, "padding": 1,
         "bias": False, "out_hw": 32},
        {"name": "bn4", "op": "batchnorm2d", "channels": c4, "eps": BN_EPS},
        {"op": "relu"},
        {"name": "tconv5", "op": "conv_transpose2d", "in": c4, "out": 1, "kernel": 4, "stride": 2, "padding": 1,
         "bias": True, "out_hw": 64},
        {"op": "tanh"},
    ]
    manifest = {
        "architecture": "ebgan_generator",
        "description": "EB-GAN generator (Zhao et al. 2016) trained on Fashion-MNIST resized to 64x64 grayscale",
        "input": {"name": "z", "shape": [1, NZ, 1, 1], "distribution": "N(0,1)"},
        "output": {"shape": [1, 1, 64, 64], "range": "[-1,1] (tanh); pixel = (y+1)*127.5"},
        "layers": layers,
        "widths": list(widths),
        "bn_eps": BN_EPS,
        "bn_momentum": BN_MOMENTUM,
        "bn_mode": "inference: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias",
        "layout": "PyTorch: ConvTranspose2d weight [Cin, Cout, kh, kw]; BN vectors [C]",
        "parameters": params,
        "num_parameters": int(n_g),
        "fp16_bytes": int(2 * sum(int(np.prod(p["shape"])) for p in params)),
        "test_vectors": {"z": "z.npy float32 [8,100,1,1] = first 8 of torch.randn(64,100,1,1, "
                              "generator=torch.Generator().manual_seed(seed))",
                         "images": "images.npy float32 [8,1,64,64], generator eval mode, CPU float32"},
        "seed": args.seed,
        "epochs": epochs_done,
        "epochs_requested": args.epochs,
        "steps": step,
        "batch": args.batch,
        "margin": args.margin,
        "margin_units": "per-sample energy = mean over the 64x64 pixels of squared reconstruction error, images in [-1,1]",
        "lambda_pt": args.lambda_pt,
        "optimizer": {"name": "Adam", "lr": args.lr, "betas": [args.beta1, 0.999], "both": "G and D"},
        "init": "conv weights N(0,0.02); BN weight N(1,0.02), bias 0",
        "data": "Fashion-MNIST train (%d images), (p/255-0.5)/0.5, bilinear resize 28->64" % n,
        "final_losses_last_epoch_mean": final,
        "wall_time_s": round(time.time() - t_start, 2),
        "train_time_s": round(train_s, 2),
        "device": device_name,
        "torch": torch.__version__,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python3"] + sys.argv),
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    log("done: %d epochs, %d steps, train %.1f s, wall %.1f s, final %s -> %s" %
        (epochs_done, step, train_s, manifest["wall_time_s"], final, args.out))


if __name__ == "__main__":
    main()
