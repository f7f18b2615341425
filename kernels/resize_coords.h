// Resize's coordinate rules (ResizeParams, infer/ops.h) shared by the reference, the CPU and the CUDA
// kernels: the source coordinate of an output index, the nearest pixel and the two linear taps with
// their weight. In float, as PyTorch computes them (src = inv * (o + 0.5) - 0.5 with inv = in / out
// or 1 / scale), rounded per operation on the device too (no FMA contraction), so every backend picks
// the same pixels. Header-only; host and device when compiled by nvcc.
#pragma once

#include <cmath>
#include <cstdint>

#include "infer/ops.h"

#if defined(__CUDACC__)
#define INFER_RESIZE_HD __host__ __device__ __forceinline__
#else
#define INFER_RESIZE_HD inline
#endif

namespace infer::resize {

// One spatial axis: sizes, coordinate mode and inv, the input step per output step.
struct Axis {
  int in, out;
  ResizeCoord coord;
  float inv;
};

inline Axis make_axis(int64_t in, int64_t out, ResizeCoord coord, float given_scale) {
  float inv;
  if (coord == ResizeCoord::AlignCorners)
    inv = out > 1 ? float(in - 1) / float(out - 1) : 0.f;
  else
    inv = given_scale > 0 ? 1.f / given_scale : float(in) / float(out);
  return {static_cast<int>(in), static_cast<int>(out), coord, inv};
}

INFER_RESIZE_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// The source coordinate of output index o (unclamped).
INFER_RESIZE_HD float source(const Axis& a, int o) {
  switch (a.coord) {
    case ResizeCoord::AlignCorners:
    case ResizeCoord::Asymmetric: return mul(a.inv, float(o));
    case ResizeCoord::PytorchHalfPixel:
      if (a.out == 1) return 0.f;
      return mul(a.inv, float(o) + 0.5f) - 0.5f;
    case ResizeCoord::HalfPixel:
    default: return mul(a.inv, float(o) + 0.5f) - 0.5f;
  }
}

INFER_RESIZE_HD int clamp_index(float v, int n) {
  return v < 0.f ? 0 : v > float(n - 1) ? n - 1 : static_cast<int>(v);
}

// Nearest: the source coordinate rounded by `mode`, clamped to [0, in - 1].
INFER_RESIZE_HD int nearest(const Axis& a, int o, ResizeNearest mode) {
  const float x = source(a, o);
  float r;
  switch (mode) {
    case ResizeNearest::Floor: r = floorf(x); break;
    case ResizeNearest::Ceil: r = ceilf(x); break;
    case ResizeNearest::RoundPreferCeil: r = floorf(x + 0.5f); break;
    case ResizeNearest::RoundPreferFloor:
    default: r = ceilf(x - 0.5f); break;
  }
  return clamp_index(r, a.in);
}

// Linear: the coordinate clamped to [0, in - 1], its taps i0 <= i1 and the weight w1 of i1.
struct Taps {
  int i0, i1;
  float w1;
};
INFER_RESIZE_HD Taps linear(const Axis& a, int o) {
  float x = source(a, o);
  x = x < 0.f ? 0.f : x > float(a.in - 1) ? float(a.in - 1) : x;
  const int i0 = static_cast<int>(x);  // x >= 0: truncation is floor
  const int i1 = i0 + 1 < a.in ? i0 + 1 : i0;
  return {i0, i1, x - float(i0)};
}

}  // namespace infer::resize
