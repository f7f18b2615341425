// CPU `layout` nodes (the channels_last pass): NCHW <-> NHWC copies of a 4-D float32 activation. Both
// directions are a batch of matrix transposes, [C][H*W] -> [H*W][C] per image (to NHWC) or back, done
// in L x L tiles (L = the ISA's lanes: 16 on AVX-512, 8 on AVX2, 4 on baseline): L row loads, the
// tile transposed in registers by log2(L) rounds of lane interleaves (zip of rows i and i + L/2; after
// the last round vector j holds column j), L row stores. Edge tiles (rows or columns past a multiple
// of L) go element by element. C <= 4 (an image): to NHWC the C plane vectors of L pixels are
// interleaved by two-vector shuffles, C - 1 per output vector. Threads (thread_pool.h) over (image, tile row, chunk of
// columns) or blocks of pixels; below kParallelMin elements on one thread.
// Also the definition of nchw_priority (nhwc.h), the NHWC variants' link to the NCHW heuristic.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "infer/error.h"
#include "infer/kernel.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {

int nchw_priority(const NodeDesc& node) {
  NodeDesc nchw = node;
  nchw.layout = Layout::NCHW;
  int best = -1;
  for (const KernelVariant* v : KernelRegistry::global().variants("cpu", op_name(op_type(node.params))))
    if (v->run && variant_applies(*v, nchw)) best = std::max(best, v->priority_for ? v->priority_for(nchw) : v->priority);
  return best;
}

namespace {

// A pure copy of this many elements or more is split over the threads (2^17 floats, 512 KiB: below
// it the second thread's wake-up costs more than half the copy; measured in docs/kernels.md).
constexpr int64_t kParallelMin = int64_t(1) << 17;
// The interleaving of an image's few channels is faster still: 3 x 224 x 224 took 9.7 us on one
// thread, 17 on two (hot, 2026-11-27).
constexpr int64_t kSmallCParallelMin = int64_t(1) << 19;

// out[j][i] = in[i][j] for i in tile row t (rows [t*L, t*L + L)) and j in [j0, j1) (in row-major with
// leading dimension `cols`, out with `rows`); j0 a multiple of L.
template <class I>
INFER_INLINE void transpose_tile_row_body(const float* in, float* out, int64_t rows, int64_t cols, int64_t t,
                                          int64_t j0, int64_t j1) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const int64_t i0 = t * L;
  if (i0 + L > rows) {  // the last rows, fewer than L
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = i0; i < rows; ++i) out[j * rows + i] = in[i * cols + j];
    return;
  }
  int64_t j = j0;
  for (; j + L <= j1; j += L) {
    V v[L];
    for (int r = 0; r < L; ++r) mk::load(v[r], in + (i0 + r) * cols + j);
    for (int round = 1; round < L; round *= 2) {
      V w[L];
      for (int p = 0; p < L / 2; ++p) {
        w[2 * p] = nhwc::zip<I, 0>(v[p], v[p + L / 2]);
        w[2 * p + 1] = nhwc::zip<I, 1>(v[p], v[p + L / 2]);
      }
      for (int r = 0; r < L; ++r) v[r] = w[r];
    }
    for (int c = 0; c < L; ++c) mk::store(out + (j + c) * rows + i0, v[c]);
  }
  for (; j < j1; ++j)
    for (int r = 0; r < L; ++r) out[j * rows + i0 + r] = in[(i0 + r) * cols + j];
}
INFER_PER_ISA(void, transpose_tile_row, transpose_tile_row_body,
              (const float* in, float* out, int64_t rows, int64_t cols, int64_t t, int64_t j0, int64_t j1),
              (in, out, rows, cols, t, j0, j1))

// Few channels (an image input: C <= 4): an LxL tile would be mostly empty. To NHWC, L pixels at a
// time: the C plane vectors are interleaved into C output vectors, each built by C - 1 two-vector
// shuffles (output lane l is element g = o*L + l of the pixel-major run: pixel g / C of plane g % C;
// the first shuffle takes planes 0 and 1, each further one replaces the lanes of plane k). The
// remaining pixels, and the other direction (a generator's image output), pixel by pixel.
constexpr int interleave_lane(int C, int o, int step, int L, int l) {
  const int g = o * L + l, p = g / C, c = g % C;
  if (step == 1) return c == 0 ? p : c == 1 ? L + p : 0;
  return c == step ? L + p : l;
}
template <class I, int C, int O, int Step, size_t... l>
INFER_INLINE typename I::Vec interleave_step(const typename I::Vec& a, const typename I::Vec& b,
                                             std::index_sequence<l...>) {
  constexpr int L = I::kLanes;
#if defined(__clang__)
  return __builtin_shufflevector(a, b, interleave_lane(C, O, Step, L, int(l))...);
#else
  typedef int IV __attribute__((vector_size(sizeof(typename I::Vec))));
  return __builtin_shuffle(a, b, IV{interleave_lane(C, O, Step, L, int(l))...});
#endif
}
template <class I, int C, int O>
INFER_INLINE typename I::Vec interleave_out(const typename I::Vec (&v)[C]) {
  const auto lanes = std::make_index_sequence<I::kLanes>{};
  typename I::Vec r = interleave_step<I, C, O, 1>(v[0], v[1], lanes);
  if constexpr (C > 2) r = interleave_step<I, C, O, 2>(r, v[2], lanes);
  if constexpr (C > 3) r = interleave_step<I, C, O, 3>(r, v[3], lanes);
  return r;
}
template <class I, int C, size_t... o>
INFER_INLINE void interleave_store(const typename I::Vec (&v)[C], float* out, std::index_sequence<o...>) {
  (mk::store(out + o * I::kLanes, interleave_out<I, C, int(o)>(v)), ...);
}

template <class I, int C>
INFER_INLINE void small_c_body(const float* in, float* out, int64_t HW, int64_t p0, int64_t p1, bool to_nhwc) {
  constexpr int L = I::kLanes;
  int64_t p = p0;
  if (to_nhwc) {
    for (; p + L <= p1; p += L) {
      typename I::Vec v[C];
      for (int c = 0; c < C; ++c) mk::load(v[c], in + c * HW + p);
      interleave_store<I, C>(v, out + p * C, std::make_index_sequence<C>{});
    }
    for (; p < p1; ++p)
      for (int c = 0; c < C; ++c) out[p * C + c] = in[c * HW + p];
  } else {
    for (; p < p1; ++p)
      for (int c = 0; c < C; ++c) out[c * HW + p] = in[p * C + c];
  }
}
template <class I>
INFER_INLINE void small_c_rows_body(const float* in, float* out, int64_t C, int64_t HW, int64_t p0, int64_t p1,
                                    bool to_nhwc) {
  switch (C) {
    case 2: return small_c_body<I, 2>(in, out, HW, p0, p1, to_nhwc);
    case 3: return small_c_body<I, 3>(in, out, HW, p0, p1, to_nhwc);
    case 4: return small_c_body<I, 4>(in, out, HW, p0, p1, to_nhwc);
  }
}
INFER_PER_ISA(void, small_c_rows, small_c_rows_body,
              (const float* in, float* out, int64_t C, int64_t HW, int64_t p0, int64_t p1, bool to_nhwc),
              (in, out, C, HW, p0, p1, to_nhwc))

bool layout_applicable(const NodeDesc& node) {
  const auto& p = std::get<LayoutParams>(node.params);
  return node.input_shapes[0].size() == 4 && node.output_shapes[0] == node.input_shapes[0] &&
         node.layout == p.to;
}

void layout_run(const KernelCall& call) {
  const auto& p = std::get<LayoutParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  if (s.size() != 4 || call.node.output_shapes[0] != s)
    throw Error("cpu layout: needs a 4-D input and an output of the same shape, got " + shape_str(s) +
                " -> " + shape_str(call.node.output_shapes[0]));
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3], numel = N * C * HW;
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  if (numel == 0) return;
  if (p.from == p.to || C == 1 || HW == 1) {  // the same memory order
    if (x != y) std::memcpy(y, x, static_cast<size_t>(numel) * sizeof(float));
    return;
  }
  if (C <= 4) {
    constexpr int64_t kBlock = 4096;  // pixels per iteration
    const int64_t blocks = (HW + kBlock - 1) / kBlock;
    const auto small_c_rows = small_c_rows_for(call.node.isa);
    const bool to_nhwc = p.to == Layout::NHWC;
    parallel_for(N * blocks, numel >= kSmallCParallelMin, [&](int64_t t0, int64_t t1, int) {
      for (int64_t task = t0; task < t1; ++task) {
        const int64_t n = task / blocks, p0 = task % blocks * kBlock;
        small_c_rows(x + n * C * HW, y + n * C * HW, C, HW, p0, std::min(HW, p0 + kBlock), to_nhwc);
      }
    });
    return;
  }
  // to NHWC: [C][HW] -> [HW][C] per image; to NCHW: [HW][C] -> [C][HW]. One iteration per (image,
  // tile row, chunk of kChunk columns): MobileNet's 32 x 112 x 112 is 2 tile rows, 26 iterations.
  constexpr int64_t kChunk = 1024;
  const int64_t rows = p.to == Layout::NHWC ? C : HW, cols = p.to == Layout::NHWC ? HW : C;
  const int64_t L = isa::shape(call.node.isa).lanes, tiles = (rows + L - 1) / L;
  const int64_t chunks = (cols + kChunk - 1) / kChunk, per_image = tiles * chunks;
  const auto transpose_tile_row = transpose_tile_row_for(call.node.isa);
  parallel_for(N * per_image, numel >= kParallelMin, [&](int64_t t0, int64_t t1, int) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t n = task / per_image, t = task % per_image / chunks, j0 = task % chunks * kChunk;
      transpose_tile_row(x + n * rows * cols, y + n * rows * cols, rows, cols, t, j0, std::min(cols, j0 + kChunk));
    }
  });
}

}  // namespace

INFER_REGISTER_KERNELS(layout) {
  registry.add("cpu", {
      // reads `from` and writes `to` (the node's layout): offered in either
      {.op = "layout", .name = "transpose_tiled", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .applicable = layout_applicable, .run = layout_run},
  });
}

}  // namespace infer::cpu
