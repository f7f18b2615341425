// Building blocks of the CPU kernels that run NHWC (channels-last) nodes, the channels_last pass's
// layout on the cpu backend (docs/kernels.md "CPU: the channels-last path"):
//  - partial vectors along the channels: load_n / store_n move the first n (< kLanes) floats of a
//    vector with AVX-512 masks, AVX2 vmaskmovps, or a copy through the stack on baseline, so a channel
//    count that is not a multiple of the vector width (MobileNet's 24, EfficientNet's 40 at AVX-512)
//    costs one masked vector, not a scalar loop, and never reads or writes past the tensor;
//  - zip (a lane interleave of two vectors) and copy_n (a short copy: whole vectors, one masked);
//  - the fused activations that are a few vector operations (ReLU, Clip = ReLU6, HardSigmoid,
//    HardSwish), NaN-propagating like activate() (im2col.h); the others run activate() per element,
//    a per-channel PRelu (fuse_prelu) as a vector select with the channels' slopes beside the values;
//  - store_tile / accumulate_window: the register tile of conv2d.gemm_nhwc's GEMM and its epilogue;
//  - nchw_priority(node): the priority the default heuristic gives the node in NCHW, which an NHWC
//    variant that runs the node as well as the NCHW ones returns (the pass then keeps the node in its
//    input's layout, so NHWC regions do not end at it and NCHW graphs do not start one there).
// Always_inline templates over an isa.h traits struct: call them from INFER_PER_ISA bodies only.
#pragma once

#include <immintrin.h>  // declares the target builtins below (its target pragmas)

#include <cstdint>
#include <cstring>
#include <utility>

#include "infer/kernel.h"
#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"

namespace infer::cpu {

// The best default priority among the cpu variants of node's op that run it in NCHW (node.layout is
// taken as NCHW), the reference included; -1 where none applies. For NHWC-only variants'
// priority_for (a variant that also runs NCHW must not call it: it would ask itself).
int nchw_priority(const NodeDesc& node);

// Permutes an NCHW-ordered 4-D shape into the memory order of an NHWC tensor: [N, H, W, C].
inline Shape nhwc_order(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

namespace nhwc {

using mk::load, mk::store;

// v = p[0 .. n), zeros after; 0 <= n <= kLanes. Reads nothing past p + n. GCC's target builtins,
// not the <immintrin.h> intrinsics: those are always_inline functions of their own target, which GCC
// refuses to inline into this (target-less) template before it is inlined into a per-ISA function;
// a builtin is only checked where it is finally expanded. clang (the fuzz build) takes the copy.
template <class I>
INFER_INLINE void load_n(typename I::Vec& v, const float* p, int64_t n) {
  using V = typename I::Vec;
#if !defined(__clang__)
  if constexpr (I::kIsa == CpuIsa::Avx512) {
    v = (V)__builtin_ia32_loadups512_mask(p, V{}, static_cast<uint16_t>((1u << n) - 1));
    return;
  } else if constexpr (I::kIsa == CpuIsa::Avx2) {
    typedef int32_t IV __attribute__((vector_size(32)));
    const IV lane = {0, 1, 2, 3, 4, 5, 6, 7};
    v = (V)__builtin_ia32_maskloadps256(reinterpret_cast<const V*>(p), (IV)(lane < static_cast<int32_t>(n)));
    return;
  }
#endif
  float t[I::kLanes] = {};
  for (int64_t l = 0; l < n; ++l) t[l] = p[l];
  load(v, t);
}

// p[0 .. n) = the first n lanes of v; 0 <= n <= kLanes. Writes nothing past p + n.
template <class I>
INFER_INLINE void store_n(float* p, const typename I::Vec& v, int64_t n) {
  using V = typename I::Vec;
#if !defined(__clang__)
  if constexpr (I::kIsa == CpuIsa::Avx512) {
    __builtin_ia32_storeups512_mask(p, v, static_cast<uint16_t>((1u << n) - 1));
    return;
  } else if constexpr (I::kIsa == CpuIsa::Avx2) {
    typedef int32_t IV __attribute__((vector_size(32)));
    const IV lane = {0, 1, 2, 3, 4, 5, 6, 7};
    __builtin_ia32_maskstoreps256(reinterpret_cast<V*>(p), (IV)(lane < static_cast<int32_t>(n)), v);
    return;
  }
#endif
  float t[I::kLanes];
  store(t, v);
  for (int64_t l = 0; l < n; ++l) p[l] = t[l];
}

// Lane k of zip<q>(a, b): a and b alternating from lane q * L/2 on (q = 0: the low halves). The lane
// interleave of the layout transposes and of channel_shuffle.
template <class I, int q, size_t... k>
INFER_INLINE typename I::Vec zip_impl(const typename I::Vec& a, const typename I::Vec& b,
                                      std::index_sequence<k...>) {
  constexpr int L = I::kLanes;
#if defined(__clang__)
  return __builtin_shufflevector(a, b, ((k % 2 ? L : 0) + q * L / 2 + int(k) / 2)...);
#else
  typedef int IV __attribute__((vector_size(sizeof(typename I::Vec))));
  return __builtin_shuffle(a, b, IV{static_cast<int>((k % 2 ? L : 0) + q * L / 2 + k / 2)...});
#endif
}
template <class I, int q>
INFER_INLINE typename I::Vec zip(const typename I::Vec& a, const typename I::Vec& b) {
  return zip_impl<I, q>(a, b, std::make_index_sequence<I::kLanes>{});
}

// y[0 .. n) = x[0 .. n): whole vectors, then one masked vector (a channel run of a pixel is tens of
// floats: a memcpy call per run cost more than the copy).
template <class I>
INFER_INLINE void copy_n(float* y, const float* x, int64_t n) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V v;
    load(v, x + i);
    store(y + i, v);
  }
  if (i < n) {
    V v;
    load_n<I>(v, x + i, n - i);
    store_n<I>(y + i, v, n - i);
  }
}

// Loads / stores n lanes: whole vectors unmasked.
template <class I>
INFER_INLINE void load_upto(typename I::Vec& v, const float* p, int64_t n) {
  if (n >= I::kLanes) load(v, p);
  else load_n<I>(v, p, n);
}
template <class I>
INFER_INLINE void store_upto(float* p, const typename I::Vec& v, int64_t n) {
  if (n >= I::kLanes) store(p, v);
  else store_n<I>(p, v, n);
}

// The activations that are a few vector operations, in the form activate() computes them (NaN in,
// NaN out); true when `kind` is one of them (the others: activate() per element afterwards).
inline bool vector_activation(ActivationKind kind) {
  return kind == ActivationKind::None || kind == ActivationKind::Relu || kind == ActivationKind::Clip ||
         kind == ActivationKind::HardSigmoid || kind == ActivationKind::HardSwish;
}

template <class V>
INFER_INLINE V clamp_v(V v, float lo, float hi) {
  v = v < lo ? V{} + lo : v;
  return v > hi ? V{} + hi : v;
}

template <class I>
INFER_INLINE typename I::Vec activate_v(typename I::Vec v, const Activation& a) {
  using V = typename I::Vec;
  switch (a.kind) {
    case ActivationKind::Relu: return v < 0.f ? V{} : v;
    case ActivationKind::Clip: return clamp_v(v, a.alpha, a.beta);
    case ActivationKind::HardSigmoid: return clamp_v(a.alpha * v + a.beta, 0.f, 1.f);
    case ActivationKind::HardSwish: return v * clamp_v(v + 3.f, 0.f, 6.f) * (1.f / 6.f);
    default: return v;
  }
}

// The activation as a compile-time class, for epilogues that dispatch once per node: none, ReLU and
// Clip inline, the other vector kinds through activate_v's switch, the rest per element afterwards.
enum ActClass { kActNone, kActRelu, kActClip, kActVector, kActScalar };
inline int act_class_of(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::None: return kActNone;
    case ActivationKind::Relu: return kActRelu;
    case ActivationKind::Clip: return kActClip;
    default: return vector_activation(kind) ? kActVector : kActScalar;
  }
}
template <class I, int A>
INFER_INLINE typename I::Vec act_class(typename I::Vec v, const Activation& a) {
  using V = typename I::Vec;
  if constexpr (A == kActRelu) return v < 0.f ? V{} : v;
  if constexpr (A == kActClip) return clamp_v(v, a.alpha, a.beta);
  if constexpr (A == kActVector) return activate_v<I>(v, a);
  return v;
}

// y[i] = y[i] < 0 ? slope[i] * y[i] : y[i] for i < n: a per-channel PRelu on n contiguous channels of
// one pixel (the prelu kernel's select, so NaN passes), whole vectors then one masked.
template <class I>
INFER_INLINE void prelu_span(float* y, const float* slope, int64_t n) {
  using V = typename I::Vec;
  for (int64_t i = 0; i < n; i += I::kLanes) {
    V v, s;
    load_upto<I>(v, y + i, n - i);
    load_upto<I>(s, slope + i, n - i);
    store_upto<I>(y + i, v < 0.f ? v * s : v, n - i);
  }
}

// The activations vector_activation() leaves out (SiLU, sigmoid, tanh, ..., a per-channel PRelu with
// `slope` at y's first channel), on n contiguous floats: the one place the NHWC kernels apply them,
// vectorised by activation_simd.h inside each level's function (I).
template <class I>
INFER_INLINE void activate_span(float* y, int64_t n, const Activation& a, const float* slope = nullptr) {
  if (vector_activation(a.kind)) return;
  if (a.kind == ActivationKind::PRelu) return prelu_span<I>(y, slope, n);
  activate_row<I>(y, n, a);
}

// The GEMM tile of conv2d.gemm_nhwc (conv2d_nhwc.cc), shared with depthwise_pointwise.fused_nhwc:
// kMR pixels (rows of A read in place) x NV vectors of output channels, and its epilogue.
// The epilogue of one tile (the bias is already in acc): rows [0, rows) of acc (pixels), NV vectors
// of output channels from column c0, `cols` of them real (the last vector masked where cols is not a multiple of kLanes), the
// activation of class A (ActClass). The row loop has a constant trip count, so the accumulators
// stay in registers (a loop to `rows` indexed them through the stack).
template <class I, int NV, int A>
INFER_INLINE void store_tile(typename I::Vec (&acc)[I::kMR][NV], int64_t rows, int64_t cols, const float* res,
                             float* y, int64_t ld, const Activation& act, const float* slope) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const bool full = cols == NV * L;
  const int64_t last = cols - (NV - 1) * L;  // lanes of the last vector
#pragma GCC unroll 16
  for (int r = 0; r < I::kMR; ++r) {
    if (r >= rows) break;
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q) {
      V v = acc[r][q];
      float* yq = y + r * ld + q * L;
      if (full || q < NV - 1) {
        if (res) {
          V rv;
          mk::load(rv, res + r * ld + q * L);
          v += rv;
        }
        mk::store(yq, act_class<I, A>(v, act));
      } else {
        if (res) {
          V rv;
          load_n<I>(rv, res + r * ld + q * L, last);
          v += rv;
        }
        store_n<I>(yq, act_class<I, A>(v, act), last);
      }
    }
  }
  if constexpr (A == kActScalar)
    for (int64_t r = 0; r < rows; ++r) activate_span<I>(y + r * ld, cols, act, slope);
}

// acc[r][q] = init[q] + sum over the KH tap rows s and their seg floats j of arow[r][s*stride + j] *
// b[(s*seg + j)*ldb + q*kLanes ..]: a pixel's window read in place in NHWC (stride = W*C: its tap
// rows sit one image row apart) or from a gathered row (stride = seg).
template <class I, int NV>
INFER_INLINE void accumulate_window(const float* const (&arow)[I::kMR], int64_t stride, int64_t segs, int64_t seg,
                                    const float* b, int64_t ldb, const typename I::Vec (&init)[NV],
                                    typename I::Vec (&acc)[I::kMR][NV]) {
  using V = typename I::Vec;
  for (int r = 0; r < I::kMR; ++r)
    for (int q = 0; q < NV; ++q) acc[r][q] = init[q];
  for (int64_t sg = 0; sg < segs; ++sg) {
    const float* a[I::kMR];
    for (int r = 0; r < I::kMR; ++r) a[r] = arow[r] + sg * stride;
    const float* bs = b + sg * seg * ldb;
    for (int64_t j = 0; j < seg; ++j) {
      V bv[NV];
      for (int q = 0; q < NV; ++q) mk::load(bv[q], bs + j * ldb + q * I::kLanes);
      for (int r = 0; r < I::kMR; ++r) {
        const float ar = a[r][j];
        for (int q = 0; q < NV; ++q) acc[r][q] += ar * bv[q];
      }
    }
  }
}

}  // namespace nhwc
}  // namespace infer::cpu
