// CPU conv2d "winograd_f4x4" / "winograd_f2x2": Winograd minimal filtering (Lavin & Gray 2016, "Fast
// Algorithms for Convolutional Neural Networks"), F(m x m, 3x3) with m = 4 (6x6 input tiles, 36
// products) or m = 2 (4x4 tiles, 16): for 3x3, stride 1, dilation 1, groups 1, NCHW fp32, any padding
// (asymmetric too), any size (partial tiles at the bottom / right), optional bias, residual input and
// fused activation. Weights transformed once in prepare() (U = G g G^T in double, rounded once, packed
// for the GEMM); per sample three OpenMP loops (guided): input transform V = B^T d B (one iteration per input
// channel and tile row), a*a independent GEMMs M[xi] = U[xi] V[xi] (one iteration per (xi, block of kMR
// output channels), the register-blocked kernel of gemm_microkernel.h, no BLAS: OpenBLAS must not
// run inside the region and threads each small GEMM badly), output transform Y = A^T M A + bias + residual, activation
// (one iteration per output channel and tile row). Tiles run along the vector lanes (16 per vector on
// AVX-512, 8 on AVX2, 4 on baseline: GCC vector extensions compiled per level, isa.h). The
// transforms change the summation order and round in fp32 (docs/kernels.md). No allocation at run time.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/conv_call.h"
#include "infer/kernel.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/omp_last.h"

namespace infer::cpu {
namespace {

using mk::load, mk::store;
// Loops smaller than this many multiply-adds run on one thread (as im2col.cc's kParallelMin).
constexpr int64_t kParallelMin = int64_t(1) << 15;

// ---- the 1-D transforms (Lavin & Gray's matrices, written out: a multiply by 0 or 1 is not free in
// IEEE arithmetic, so the compiler would keep them). T is a vector of tiles (one per lane). ---------

// r = B^T d, d and r of length m + 2, strides ds and rs.
template <int m, class T>
__attribute__((always_inline)) inline void input_1d(const T* d, int ds, T* r, int rs) {
  if constexpr (m == 4) {
    const T d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3 = d[3 * ds], d4 = d[4 * ds], d5 = d[5 * ds];
    r[0] = 4.f * d0 - 5.f * d2 + d4;
    r[rs] = d3 + d4 - 4.f * (d1 + d2);
    r[2 * rs] = 4.f * (d1 - d2) + d4 - d3;
    r[3 * rs] = 2.f * (d3 - d1) + d4 - d2;
    r[4 * rs] = 2.f * (d1 - d3) + d4 - d2;
    r[5 * rs] = 4.f * d1 - 5.f * d3 + d5;
  } else {
    const T d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3 = d[3 * ds];
    r[0] = d0 - d2;
    r[rs] = d1 + d2;
    r[2 * rs] = d2 - d1;
    r[3 * rs] = d1 - d3;
  }
}

// o = A^T s, s of length m + 2, o of length m.
template <int m, class T>
__attribute__((always_inline)) inline void output_1d(const T* s, int ss, T* o, int os) {
  if constexpr (m == 4) {
    const T s0 = s[0], s1 = s[ss], s2 = s[2 * ss], s3 = s[3 * ss], s4 = s[4 * ss], s5 = s[5 * ss];
    const T p12 = s1 + s2, m12 = s1 - s2, p34 = s3 + s4, m34 = s3 - s4;
    o[0] = s0 + p12 + p34;
    o[os] = m12 + 2.f * m34;
    o[2 * os] = p12 + 4.f * p34;
    o[3 * os] = m12 + 8.f * m34 + s5;
  } else {
    const T s0 = s[0], s1 = s[ss], s2 = s[2 * ss], s3 = s[3 * ss];
    o[0] = s0 + s1 + s2;
    o[os] = s1 - s2 - s3;
  }
}

// ---- geometry ---------------------------------------------------------------------------------

struct WinoDims {
  int m = 4, a = 6;                 // output tile, input tile (m + 2)
  int64_t N, C, H, W, CO, HO, WO;   // NCHW sizes
  int64_t pt, pl;                   // top / left padding (bottom / right follow from HO, WO)
  isa::Shape s;                     // the node's ISA level: s.lanes tiles per vector, s.mr GEMM rows
  int64_t TH, TW, T, Tp;            // tile rows, tile columns, tiles, tiles rounded up to s.lanes
  int64_t COB;                      // output-channel blocks of s.mr
  int64_t Hp, Wp;                   // a padded input plane: every tile's rows and columns
  size_t v_floats() const { return static_cast<size_t>(a * a * C * Tp); }
  size_t m_floats() const { return static_cast<size_t>(a * a * CO * Tp); }
  int64_t plane_floats() const { return Hp * Wp + s.lanes * m; }  // + slack for the last segment
  size_t p_floats() const { return static_cast<size_t>(C * plane_floats()); }
};

WinoDims wino_dims(const NodeDesc& node, int m) {
  const auto& p = std::get<Conv2DParams>(node.params);
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  WinoDims d;
  d.m = m;
  d.a = m + 2;
  d.s = isa::shape(node.isa);
  d.N = xs[0], d.C = xs[1], d.H = xs[2], d.W = xs[3], d.CO = ws[0], d.HO = ys[2], d.WO = ys[3];
  d.pt = p.pad.top, d.pl = p.pad.left;
  d.TH = (d.HO + m - 1) / m, d.TW = (d.WO + m - 1) / m, d.T = d.TH * d.TW;
  d.Tp = (d.T + d.s.lanes - 1) / d.s.lanes * d.s.lanes;
  d.COB = (d.CO + d.s.mr - 1) / d.s.mr;
  d.Hp = d.TH * m + 2, d.Wp = d.TW * m + 2;
  return d;
}

// ---- weights: U[xi][cb][ci][r] = (G g G^T)[xi] of output channel cb * mr + r (0 past C_out) ------

struct Prepared {
  std::vector<float> u;
};

std::shared_ptr<void> prepare_weights(const NodeDesc& node, int m) {
  const WinoDims d = wino_dims(node, m);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv2d.winograd: the weight must be a constant");
  // G, a x 3 (Lavin & Gray): rows of F(4x4, 3x3) and F(2x2, 3x3)
  static const double G4[6][3] = {{1 / 4., 0, 0},           {-1 / 6., -1 / 6., -1 / 6.},
                                   {-1 / 6., 1 / 6., -1 / 6.}, {1 / 24., 1 / 12., 1 / 6.},
                                   {1 / 24., -1 / 12., 1 / 6.}, {0, 0, 1}};
  static const double G2[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
  const int a = d.a;
  auto G = [&](int i, int k) { return m == 4 ? G4[i][k] : G2[i][k]; };
  auto prep = std::make_shared<Prepared>();
  const int64_t mr = d.s.mr;
  prep->u.assign(static_cast<size_t>(a * a * d.COB * d.C * mr), 0.f);
  for (int64_t co = 0; co < d.CO; ++co)
    for (int64_t ci = 0; ci < d.C; ++ci) {
      const float* g = w + (co * d.C + ci) * 9;
      double gg[6][3];  // G g
      for (int i = 0; i < a; ++i)
        for (int k = 0; k < 3; ++k)
          gg[i][k] = G(i, 0) * g[k] + G(i, 1) * g[3 + k] + G(i, 2) * g[6 + k];
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j) {
          const double u = gg[i][0] * G(j, 0) + gg[i][1] * G(j, 1) + gg[i][2] * G(j, 2);
          const int64_t xi = i * a + j;
          prep->u[static_cast<size_t>(((xi * d.COB + co / mr) * d.C + ci) * mr + co % mr)] =
              static_cast<float>(u);
        }
    }
  return prep;
}

// ---- lane shuffles: a row of L tiles <-> one vector per tile column (L = the ISA's lanes) -----------

// Lane k of a two-vector shuffle's result, as a function of k (a compile-time table: a class-type
// template argument). Indices < L take lane i of the first vector, >= L lane i - L of the second.
struct Mask {
  enum Kind { Deint4Lo, Deint4Hi, Halves, Deint2, Shift1, Zip, Pairs4 } kind;
  int L, j = 0, q = 0;
  constexpr int operator()(int k) const {
    switch (kind) {
      case Deint4Lo: return k < L / 2 ? 4 * k + j : 0;           // p[4k + j], k < L/2, from (v0, v1)
      case Deint4Hi: return k >= L / 2 ? 4 * k + j - 2 * L : 0;  // p[4k + j], k >= L/2, from (v2, v3)
      case Halves: return k < L / 2 ? k : L + k;                 // first half of a, second of b
      case Deint2: return 2 * k + j;                             // p[2k + j] from (v0, v1)
      case Shift1: return k + 1;                                 // a's lanes 1.., then b's lane 0
      case Zip: return (k % 2 ? L : 0) + q * L / 2 + k / 2;      // a, b alternating; q: low / high half
      case Pairs4: {                                             // output vector q of the m = 4 interleave
        const int c = k % 4;
        return (c < 2 ? 0 : L) + 2 * ((q % 2) * L / 4 + k / 4) + c % 2;
      }
    }
    return 0;
  }
};

// Lane k of the result is lane M(k) of a (0..L-1) or of b (L..2L-1): one vpermt2ps / vpermps + blend /
// shufps sequence, whatever the compiler finds for the constant table. GCC's __builtin_shuffle,
// clang's __builtin_shufflevector (the fuzz build).
template <class I, Mask M, size_t... k>
INFER_INLINE typename I::Vec shuffle2_impl(const typename I::Vec& a, const typename I::Vec& b,
                                           std::index_sequence<k...>) {
#if defined(__clang__)
  return __builtin_shufflevector(a, b, M(static_cast<int>(k))...);
#else
  typedef int IV __attribute__((vector_size(sizeof(typename I::Vec))));
  return __builtin_shuffle(a, b, IV{M(static_cast<int>(k))...});
#endif
}
template <class I, Mask M>
INFER_INLINE typename I::Vec shuffle2(const typename I::Vec& a, const typename I::Vec& b) {
  return shuffle2_impl<I, M>(a, b, std::make_index_sequence<I::kLanes>{});
}

// Column j of L tiles of F(4x4): lane l = p[4l + j], from v0..v3 = p[0 .. 4L).
template <class I, int j>
INFER_INLINE typename I::Vec deint4(const typename I::Vec (&v)[4]) {
  constexpr int L = I::kLanes;
  return shuffle2<I, Mask{Mask::Halves, L}>(shuffle2<I, Mask{Mask::Deint4Lo, L, j}>(v[0], v[1]),
                                            shuffle2<I, Mask{Mask::Deint4Hi, L, j}>(v[2], v[3]));
}

// c[j][l] = p[l*m + j], j < m + 2, for the L tiles of a row segment p[0 .. Lm + 2): the patch columns
// of L consecutive tiles, one vector each (a stride-m deinterleave, then a one-lane shift for the two
// columns a tile shares with the next).
template <class I, int m>
INFER_INLINE void deinterleave(const float* p, typename I::Vec* c) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  if constexpr (m == 4) {
    V v[4];
    load(v[0], p), load(v[1], p + L), load(v[2], p + 2 * L), load(v[3], p + 3 * L);
    c[0] = deint4<I, 0>(v), c[1] = deint4<I, 1>(v), c[2] = deint4<I, 2>(v), c[3] = deint4<I, 3>(v);
    c[4] = shuffle2<I, Mask{Mask::Shift1, L}>(c[0], V{} + p[4 * L]);
    c[5] = shuffle2<I, Mask{Mask::Shift1, L}>(c[1], V{} + p[4 * L + 1]);
  } else {
    V v0, v1;
    load(v0, p), load(v1, p + L);
    c[0] = shuffle2<I, Mask{Mask::Deint2, L, 0}>(v0, v1), c[1] = shuffle2<I, Mask{Mask::Deint2, L, 1}>(v0, v1);
    c[2] = shuffle2<I, Mask{Mask::Shift1, L}>(c[0], V{} + p[2 * L]);
    c[3] = shuffle2<I, Mask{Mask::Shift1, L}>(c[1], V{} + p[2 * L + 1]);
  }
}

// The inverse for the output: p[l*m + c] = o[c][l], Lm floats written to p.
template <class I, int m>
INFER_INLINE void interleave(const typename I::Vec* o, float* p) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  constexpr Mask lo{Mask::Zip, L, 0, 0}, hi{Mask::Zip, L, 0, 1};
  if constexpr (m == 4) {
    const V u0 = shuffle2<I, lo>(o[0], o[1]), u1 = shuffle2<I, hi>(o[0], o[1]);
    const V u2 = shuffle2<I, lo>(o[2], o[3]), u3 = shuffle2<I, hi>(o[2], o[3]);
    store(p, shuffle2<I, Mask{Mask::Pairs4, L, 0, 0}>(u0, u2));
    store(p + L, shuffle2<I, Mask{Mask::Pairs4, L, 0, 1}>(u0, u2));
    store(p + 2 * L, shuffle2<I, Mask{Mask::Pairs4, L, 0, 2}>(u1, u3));
    store(p + 3 * L, shuffle2<I, Mask{Mask::Pairs4, L, 0, 3}>(u1, u3));
  } else {
    store(p, shuffle2<I, lo>(o[0], o[1])), store(p + L, shuffle2<I, hi>(o[0], o[1]));
  }
}

// ---- input transform: V[xi][c][t] for tile t = ty * TW + tx ------------------------------------

// Input channel c's plane copied into its zero-padded plane P [Hp][Wp] (padded row / column = image
// row / column + top / left padding), followed by Lm floats of slack: every tile's patch is then in
// bounds, and so is an L-tile segment that runs past the row's last tile (its extra lanes read the
// next rows or the slack and are discarded). Copied by the thread that transforms the channel, so
// the plane is in its cache.
__attribute__((always_inline)) inline void pad_plane(const WinoDims& d, const float* xc, float* pc) {
  for (int64_t r = 0; r < d.Hp; ++r) {
    float* row = pc + r * d.Wp;
    const int64_t iy = r - d.pt;
    if (iy < 0 || iy >= d.H) {
      std::fill(row, row + d.Wp, 0.f);
      continue;
    }
    std::fill(row, row + d.pl, 0.f);
    std::memcpy(row + d.pl, xc + iy * d.W, static_cast<size_t>(d.W) * sizeof(float));
    std::fill(row + d.pl + d.W, row + d.Wp, 0.f);
  }
  std::fill(pc + d.Hp * d.Wp, pc + d.plane_floats(), 0.f);
}

// Channel c's tiles, L of a tile row at a time: the a patch rows of L tiles (Lm + 2 columns each)
// deinterleaved into one vector per patch column, transformed, stored. Lanes past the row's last tile
// are stored too (into the next tile row's first columns, which that row overwrites later in the same
// call, or into the padding [T, Tp)): one full-vector store per product, no masked tails; their
// values never reach an output (a GEMM column depends on its own V column only).
template <class I, int m>
INFER_INLINE void input_plane(const WinoDims& d, const float* xc, float* pc, float* v_c, int64_t xi_stride) {
  using V = typename I::Vec;
  constexpr int a = m + 2, L = I::kLanes;
  pad_plane(d, xc, pc);
  for (int64_t ty = 0; ty < d.TH; ++ty)
    for (int64_t tx0 = 0; tx0 < d.TW; tx0 += L) {
      V dv[a][a], tv[a][a];
      for (int i = 0; i < a; ++i) deinterleave<I, m>(pc + (ty * m + i) * d.Wp + tx0 * m, dv[i]);
      for (int j = 0; j < a; ++j) input_1d<m>(&dv[0][j], a, &tv[0][j], a);  // columns: B^T d
      for (int i = 0; i < a; ++i) input_1d<m>(&tv[i][0], 1, &dv[i][0], 1);  // rows: (B^T d) B
      const int64_t t0 = ty * d.TW + tx0;
      if (t0 + L <= d.Tp) {
        for (int xi = 0; xi < a * a; ++xi) store(v_c + xi * xi_stride + t0, dv[xi / a][xi % a]);
      } else {
        const int64_t n = d.Tp - t0;
        for (int xi = 0; xi < a * a; ++xi)
          std::memcpy(v_c + xi * xi_stride + t0, &dv[xi / a][xi % a], static_cast<size_t>(n) * sizeof(float));
      }
    }
}

template <class I>
INFER_INLINE void input_transform_body(const WinoDims& d, const float* xc, float* pc, float* v_c, int64_t xi_stride) {
  if (d.m == 4) return input_plane<I, 4>(d, xc, pc, v_c, xi_stride);
  input_plane<I, 2>(d, xc, pc, v_c, xi_stride);
}
INFER_PER_ISA(void, input_transform, input_transform_body,
              (const WinoDims& d, const float* xc, float* pc, float* v_c, int64_t xi_stride),
              (d, xc, pc, v_c, xi_stride))

// Zero the V columns [T, Tp) that no tile row writes (T a multiple of L leaves none; otherwise the
// last tile row's spill covers part of them): the GEMM reads them and their M columns are dropped.
void zero_v_padding(const WinoDims& d, float* v) {
  if (d.T == d.Tp) return;
  for (int64_t r = 0; r < static_cast<int64_t>(d.a * d.a) * d.C; ++r)
    std::fill(v + r * d.Tp + d.T, v + (r + 1) * d.Tp, 0.f);
}

// ---- the GEMMs: M[xi][co][t] = sum_c U[xi][co][c] V[xi][c][t] -----------------------------------

// One micro-tile: kMR output channels x NV*L tiles through the shared micro-kernel (the weights
// broadcast from the packed U, kMR consecutive floats per input channel). Rows past C_out are not stored.
template <class I, int NV>
INFER_INLINE void gemm_tile(const float* u, const float* v, int64_t ldv, int64_t K, float* mo, int64_t ldm,
                            int64_t rows) {
  typename I::Vec acc[I::kMR][NV];
  mk::accumulate<I, NV>(u, v, ldv, K, acc);
  for (int64_t r = 0; r < rows; ++r)
    for (int q = 0; q < NV; ++q) store(mo + r * ldm + q * I::kLanes, acc[r][q]);
}

// The block of kMR output channels cb of product xi, over all Tp tiles: tiles of kNV vectors, then the
// one or two vectors left (Tp is a multiple of L).
template <class I>
INFER_INLINE void gemm_block_body(const WinoDims& d, const float* u_xi_cb, const float* v_xi, float* m_xi_cb,
                                  int64_t rows) {
  constexpr int L = I::kLanes, NV = I::kNV;
  int64_t n0 = 0;
  for (; n0 + NV * L <= d.Tp; n0 += NV * L)
    gemm_tile<I, NV>(u_xi_cb, v_xi + n0, d.Tp, d.C, m_xi_cb + n0, d.Tp, rows);
  if constexpr (NV > 2) {
    if (d.Tp - n0 == 2 * L) gemm_tile<I, 2>(u_xi_cb, v_xi + n0, d.Tp, d.C, m_xi_cb + n0, d.Tp, rows);
  }
  if (d.Tp - n0 == L) gemm_tile<I, 1>(u_xi_cb, v_xi + n0, d.Tp, d.C, m_xi_cb + n0, d.Tp, rows);
}
INFER_PER_ISA(void, gemm_block, gemm_block_body,
              (const WinoDims& d, const float* u_xi_cb, const float* v_xi, float* m_xi_cb, int64_t rows),
              (d, u_xi_cb, v_xi, m_xi_cb, rows))

// ---- output transform: y = act(A^T M A + bias + r) ----------------------------------------------

// Output channel co's tile row ty, L tiles at a time: each output row's Lm pixels interleaved
// from the m column vectors, then bias, residual and activation on whole vectors (ReLU and none;
// other kinds over the row segment: activation_simd.h) and stored; a segment cut by the image's right
// edge goes through a stack buffer.
template <class I, int m>
INFER_INLINE void output_tile_row(const WinoDims& d, const float* m_co, int64_t xi_stride, int64_t ty, float bias,
                                  const float* r_co, float* y_co, const Activation& act) {
  using V = typename I::Vec;
  constexpr int a = m + 2, L = I::kLanes, span = L * m;
  for (int64_t tx0 = 0; tx0 < d.TW; tx0 += L) {
    const int64_t t0 = ty * d.TW + tx0;
    V mv[a][a], sv[m][a], ov[m][m];
    for (int xi = 0; xi < a * a; ++xi) {
      if (t0 + L <= d.Tp) {
        load(mv[xi / a][xi % a], m_co + xi * xi_stride + t0);
      } else {  // the lanes past Tp are not tiles: left 0
        mv[xi / a][xi % a] = V{};
        std::memcpy(&mv[xi / a][xi % a], m_co + xi * xi_stride + t0, static_cast<size_t>(d.Tp - t0) * sizeof(float));
      }
    }
    for (int j = 0; j < a; ++j) output_1d<m>(&mv[0][j], a, &sv[0][j], a);  // columns: A^T M
    for (int i = 0; i < m; ++i) output_1d<m>(&sv[i][0], 1, &ov[i][0], 1);  // rows: (A^T M) A
    const int64_t oy0 = ty * m, rows = std::min<int64_t>(m, d.HO - oy0);
    const int64_t cols = std::min<int64_t>(span, d.WO - tx0 * m);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t off = (oy0 + i) * d.WO + tx0 * m;
      float out[span];
      interleave<I, m>(ov[i], out);
      if (cols == span) {
        for (int q = 0; q < m; ++q) {
          V o;
          load(o, out + q * L);
          o += bias;
          if (r_co) {
            V r;
            load(r, r_co + off + q * L);
            o += r;
          }
          if (act.kind == ActivationKind::Relu) o = o < 0.f ? V{} : o;
          store(out + q * L, o);
        }
      } else {
        for (int64_t x = 0; x < cols; ++x) out[x] += bias + (r_co ? r_co[off + x] : 0.f);
        if (act.kind == ActivationKind::Relu)
          for (int64_t x = 0; x < cols; ++x) out[x] = out[x] < 0.f ? 0.f : out[x];
      }
      if (act.kind != ActivationKind::None && act.kind != ActivationKind::Relu) activate_row<I>(out, cols, act);
      std::memcpy(y_co + off, out, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

template <class I>
INFER_INLINE void output_transform_body(const WinoDims& d, const float* m_co, int64_t xi_stride, int64_t ty,
                                        float bias, const float* r_co, float* y_co, const Activation& act) {
  if (d.m == 4) return output_tile_row<I, 4>(d, m_co, xi_stride, ty, bias, r_co, y_co, act);
  output_tile_row<I, 2>(d, m_co, xi_stride, ty, bias, r_co, y_co, act);
}
INFER_PER_ISA(void, output_transform, output_transform_body,
              (const WinoDims& d, const float* m_co, int64_t xi_stride, int64_t ty, float bias, const float* r_co,
               float* y_co, const Activation& act),
              (d, m_co, xi_stride, ty, bias, r_co, y_co, act))

// ---- the variant --------------------------------------------------------------------------------

void winograd_run(const KernelCall& call, int m) {
  const WinoDims d = wino_dims(call.node, m);
  const auto io = unpack_conv_call<Prepared>(call, m == 4 ? "winograd_f4x4" : "winograd_f2x2", true);
  const float *x = io.x, *bias = io.bias, *residual = io.residual;
  float *y = io.y, *v = io.workspace;
  const Activation act = io.act;
  float* mm = v + d.v_floats();
  float* padded = mm + d.m_floats();
  const float* u = io.prep->u.data();
  const int64_t aa = d.a * d.a;
  const int64_t v_xi = d.C * d.Tp, m_xi = d.CO * d.Tp;  // strides of one product xi
  const bool parallel = aa * d.C * d.CO * d.Tp >= kParallelMin;
  const auto input_transform = input_transform_for(call.node.isa);
  const auto gemm_block = gemm_block_for(call.node.isa);
  const auto output_transform = output_transform_for(call.node.isa);
  const int64_t mr = d.s.mr;

  for (int64_t n = 0; n < d.N; ++n) {
    const float* xn = x + n * d.C * d.H * d.W;
    float* yn = y + n * d.CO * d.HO * d.WO;
    const float* rn = residual ? residual + n * d.CO * d.HO * d.WO : nullptr;
    zero_v_padding(d, v);
    // guided loops: each phase ends at a barrier where, with OMP_WAIT_POLICY=passive, a thread that
    // arrived first goes to sleep and wakes late into the next phase; guided chunks let the awake
    // thread take over part of its share (static: 7.81 -> 7.15 ms of ResNet-50's F(4x4) nodes), and
    // a bounded spin before each barrier (SpinArrival, omp_last.h) lets both reach it together
    MasterLast last;  // the master reaches the closing barrier last (omp_last.h)
    SpinArrival bar1, bar2;
#pragma omp parallel if (parallel)
    {
      // one input channel per iteration (input_plane's spill relies on its tile rows' order)
#pragma omp for schedule(guided) nowait
      for (int64_t c = 0; c < d.C; ++c)
        input_transform(d, xn + c * d.H * d.W, padded + c * d.plane_floats(), v + c * d.Tp, v_xi);
      bar1.arrive();
#pragma omp barrier
      // consecutive iterations share the product xi, so V[xi] stays in cache
#pragma omp for schedule(guided) nowait
      for (int64_t it = 0; it < aa * d.COB; ++it) {
        const int64_t xi = it / d.COB, cb = it % d.COB;
        gemm_block(d, u + (xi * d.COB + cb) * d.C * mr, v + xi * v_xi, mm + xi * m_xi + cb * mr * d.Tp,
                   std::min<int64_t>(mr, d.CO - cb * mr));
      }
      bar2.arrive();
#pragma omp barrier
#pragma omp for schedule(guided) nowait
      for (int64_t it = 0; it < d.CO * d.TH; ++it) {
        const int64_t co = it / d.TH, ty = it % d.TH;
        output_transform(d, mm + co * d.Tp, m_xi, ty, bias ? bias[co] : 0.f,
                         rn ? rn + co * d.HO * d.WO : nullptr, yn + co * d.HO * d.WO,
                         channel_activation(act, io.slope, co));  // a per-channel PRelu: co's LeakyRelu
      }
      last.arrive();
    }
  }
}

// 3x3, stride 1, dilation 1, groups 1, a constant weight, non-empty output.
bool winograd_applicable(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  if (!conv2d_ungrouped(node) || !has_constant_weight(node) || node.input_shapes.size() < 2) return false;
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  return xs.size() == 4 && ws.size() == 4 && ys.size() == 4 && ws[2] == 3 && ws[3] == 3 &&
         p.stride_h == 1 && p.stride_w == 1 && ys[2] > 0 && ys[3] > 0 && xs[1] > 0 && ws[0] > 0;
}

// The default choice (KernelVariant::priority_for; im2col_gemm has 10), from batch-1 timings of
// square C -> C 3x3 pad-1 convs, 7x7 to 112x112, C 16 to 512, and a few others, on the 2-core AMD
// EPYC VM (2026-11-25; the numbers: docs/kernels.md "CPU: conv2d Winograd"):
//  - F(4x4) wherever the output has 16 or more 4x4 tiles (13x13 and up): 1.5-3.2x faster than
//    im2col_gemm from 16 channels up (8 -> 8 at 56x56 still 1.6x); F(2x2) 1.2-1.6x slower than it.
//  - F(2x2) below that (ResNet's 7x7, 9x9, 10x10, 4x4): F(4x4)'s 16-lane tile rows are mostly empty
//    there and its weights 2.25x larger; F(2x2) 1.3-2.2x faster than im2col_gemm from C_in 32 up,
//    and no faster below (16 -> 64 at 7x7: 0.024 ms vs 0.017).
//  - neither for C_in < 8: 3 -> 64 at 224x224 took 5.7 ms (F(4x4)) vs 3.6 (the transforms cost
//    per input channel, the GEMM's K is tiny); 4 -> 32 at 112x112 was a tie.
// Inside ResNet-18 (weights cold, and F(4x4)'s are 4x the im2col ones, F(2x2)'s 16/9) F(2x2) on the
// 28x28 and 14x14 layers was no faster than F(4x4) in three paired runs (28x28: 0.81-0.86 ms vs
// 0.67-0.80; 14x14: 0.94-0.99 vs 0.77-1.02), so the threshold stays at 16 tiles.
int winograd_priority(const NodeDesc& node, int m) {
  const int fallback = m == 4 ? 5 : 4;
  if (!winograd_applicable(node)) return fallback;
  const int64_t CI = node.input_shapes[0][1], HO = node.output_shapes[0][2], WO = node.output_shapes[0][3];
  const bool small = ((HO + 3) / 4) * ((WO + 3) / 4) < 16;
  if (CI < (small ? 32 : 8)) return fallback;
  return m == (small ? 2 : 4) ? 15 : fallback;
}

template <int m>
size_t winograd_workspace(const NodeDesc& node) {
  const WinoDims d = wino_dims(node, m);
  return (d.v_floats() + d.m_floats() + d.p_floats()) * sizeof(float);
}

}  // namespace

INFER_REGISTER_KERNELS(conv2d_winograd) {
  registry.add("cpu", {
      {.op = "conv2d", .name = "winograd_f4x4", .priority = 5,
       .priority_for = [](const NodeDesc& n) { return winograd_priority(n, 4); },
       .isa = KernelVariant::Isa::PerIsa, .fuses_prelu = true,
       .applicable = winograd_applicable,
       .workspace_bytes = winograd_workspace<4>,
       .prepare = [](const NodeDesc& n) { return prepare_weights(n, 4); },
       .run = [](const KernelCall& c) { winograd_run(c, 4); }},
      {.op = "conv2d", .name = "winograd_f2x2", .priority = 4,
       .priority_for = [](const NodeDesc& n) { return winograd_priority(n, 2); },
       .isa = KernelVariant::Isa::PerIsa, .fuses_prelu = true,
       .applicable = winograd_applicable,
       .workspace_bytes = winograd_workspace<2>,
       .prepare = [](const NodeDesc& n) { return prepare_weights(n, 2); },
       .run = [](const KernelCall& c) { winograd_run(c, 2); }},
  });
}

}  // namespace infer::cpu
