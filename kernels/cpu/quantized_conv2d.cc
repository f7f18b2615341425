// CPU quantized_conv2d "qgemm": a QDQ model's convolution in integers (issue 30, docs/quantization.md
// "How it runs"), NCHW or NHWC. The input is quantized once into int16 (q - zero point, quantize_linear's
// rounding: x / x_scale half to even, quantize.h); per block of output pixels its im2col rows are int16
// with k in (c, ky, kx) order (NCHW) or (ky, kx, c) (NHWC: one copy per tap, or per kernel row with one
// group and no dilation; a 1x1 stride-1 unpadded conv with an even channel count reads the quantized
// input in place), the weight packed in the same order once in prepare(); qgemm.h's exact pmaddwd
// GEMM (gemm_rows) gives int32 (rows: pixels, columns: output channels) and the epilogue float(acc) *
// (x_scale * w_scale[k]) + bias[k] (+ residual), activation writes the float output. With 7-bit weights (|w| <= 64, `infer quantize --reduce-range`) on AVX2 /
// AVX-512 the input is quantized to uint8 instead (the values themselves) and the GEMM is qgemm.h's
// u8s8 form (vpmaddubsw, 4 k a lane, the zero point folded into the accumulators): same sums, half the
// bytes; with the level's VNNI (vpdpbusd) that form takes 8-bit weights too. Between two such nodes
// (the quantized_activations pass) an 8-bit input is only widened (a uint8 one is the u8s8 form's A
// as it is) and an 8-bit output is the epilogue's float row quantize_linear'd in the slot. Threads: the kernels' team over (image, group, block of pixels, run of weight panels: split
// where blocks are few), each item's rows and int32 tile in the thread's workspace slot; one thread
// below kParallelMin multiply-adds.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <omp.h>
#include <vector>

#include "infer/error.h"
#include "infer/kernel.h"
#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 19;
// One block's im2col rows (and its int32 tile) stay in L2 while every panel of the weight passes over it.
constexpr int64_t kBlockBytes = 64 << 10;
// (q - zero) in [-255, 255] times w in [-128, 127]: |sum| <= K * 32640 stays below 2^31 up to here.
constexpr int64_t kMaxDepth = 65536;
// The most threads one node runs on (each needs a workspace slot of about 2 * kBlockBytes).
constexpr int64_t kMaxSlots = 64;

struct QDims {
  int64_t N, C, H, W, CO, G, Cg, Kg, KH, KW, HO, WO, M, depth, pairs, mr, mb, blocks, slots;
  int64_t nr, panels, splits, per_split;  // the weight's panels a group, shared out in `splits` runs
  int64_t sh, sw, pt, pl, dh, dw;
  bool nhwc, in_place;  // in_place: A is the quantized input itself (NHWC 1x1 stride 1, no padding)
  bool q_out;           // y is 8-bit (y_dtype)
  bool q_direct;        // ... written from registers (NHWC, no residual, activation none / ReLU / Clip):
                        // the GEMM's requantization or epilogue_q8_body; else through a float tile
  // int16 sizes: the u8s8 form's uint8 input and rows (4 * ceil(depth / 4) bytes) never need more
  size_t xq_bytes() const { return up(size_t(N * C * H * W) * 2); }
  size_t a_bytes() const { return up(size_t(mb * pairs) * 4); }    // one block's rows
  size_t c_bytes() const { return up(size_t(mb * Kg) * 4); }       // one block's int32 tile
  size_t t_bytes() const { return q_out && !q_direct ? c_bytes() : 0; }  // the block's floats (8-bit y)
  size_t slot_bytes() const { return a_bytes() + c_bytes() + t_bytes(); }
  size_t workspace() const { return xq_bytes() + size_t(slots) * slot_bytes(); }
  static size_t up(size_t b) { return (b + 255) / 256 * 256; }
};

QDims qdims(const NodeDesc& node) {
  const auto& p = std::get<QuantizedConv2DParams>(node.params).conv;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  QDims d{};
  d.N = x[0], d.C = x[1], d.H = x[2], d.W = x[3];
  d.CO = w[0], d.G = p.groups, d.Cg = w[1], d.Kg = w[0] / std::max(p.groups, 1);
  d.KH = w[2], d.KW = w[3], d.HO = y[2], d.WO = y[3], d.M = d.HO * d.WO;
  d.depth = d.Cg * d.KH * d.KW, d.pairs = (d.depth + 1) / 2;
  d.mr = qgemm::tile_shape(node.isa).mr;
  // rows a block: its int16 rows and its int32 tile each near kBlockBytes (at least one tile of mr)
  const int64_t row_bytes = std::max<int64_t>(d.pairs * 4, d.Kg * 4);
  d.mb = std::max<int64_t>(d.mr, kBlockBytes / (row_bytes * d.mr) * d.mr);
  d.mb = std::min(d.mb, (d.M + d.mr - 1) / d.mr * d.mr);
  d.blocks = (d.M + d.mb - 1) / d.mb;
  d.sh = p.stride_h, d.sw = p.stride_w, d.pt = p.pad.top, d.pl = p.pad.left;
  d.dh = p.dilation_h, d.dw = p.dilation_w;
  d.nhwc = node.layout == Layout::NHWC;
  const auto& qp = std::get<QuantizedConv2DParams>(node.params);
  const ActivationKind act = qp.conv.activation.kind;
  d.q_out = qp.y_dtype != DType::F32;
  d.q_direct = d.q_out && node.layout == Layout::NHWC && !qp.conv.add_residual &&
               (act == ActivationKind::None || act == ActivationKind::Relu || act == ActivationKind::Clip);
  d.in_place = d.nhwc && d.KH == 1 && d.KW == 1 && d.sh == 1 && d.sw == 1 && !p.pad.top && !p.pad.left &&
               !p.pad.bottom && !p.pad.right && d.HO == d.H && d.WO == d.W && d.C % 2 == 0 && d.Cg % 2 == 0;
  // Few blocks (7x7 and 14x14 layers at batch 1): the weight's panels shared out too, so that every
  // thread has about 4 items; each split packs its rows again (cheap beside the multiply).
  const int64_t threads = std::max(1, omp_get_max_threads());
  d.nr = qgemm::tile_shape(node.isa).nr();
  d.panels = (d.Kg + d.nr - 1) / d.nr;
  const int64_t items = d.N * d.G * d.blocks;
  d.splits = std::clamp<int64_t>((4 * threads + items - 1) / items, 1, d.panels);
  d.per_split = (d.panels + d.splits - 1) / d.splits;
  d.splits = (d.panels + d.per_split - 1) / d.per_split;
  // Workspace slots do not depend on the thread count (workspace_bytes() and run() may see different
  // ones): at most kMaxSlots, and a run uses no more threads than there are slots.
  d.slots = std::max<int64_t>(1, std::min<int64_t>(kMaxSlots, items * d.panels));
  return d;
}

// Fewer than 8 output channels a group would fill one lane of the GEMM's 8-16: depthwise ones take
// quantized_conv2d.depthwise, the rest stay on the float path. (A PRelu epilogue never reaches here: the
// op's shape rule refuses it and variant_applies offers it only to fuses_prelu variants.)
bool applicable(const NodeDesc& node) {
  const auto& p = std::get<QuantizedConv2DParams>(node.params);
  const Shape& w = node.input_shapes[1];
  return w[0] / std::max(p.conv.groups, 1) >= 8 && w[1] * w[2] * w[3] <= kMaxDepth && node.constants.size() >= 3 &&
         node.constants[1] && node.constants[2];
}

struct Prepared {
  bool u8s8 = false;                // 7-bit weights on AVX2 / AVX-512, any with VNNI: b8, else b
  std::vector<qgemm::PackedB> b;    // one per group
  std::vector<qgemm::PackedB8> b8;  // one per group
  uint8_t zero_u8 = 0;              // the u8s8 form's zero point (an int8 type's shifted by 128)
  std::vector<float> mult;          // x_scale * w_scale[k], per output channel
  // The u8s8 form requantizing in the GEMM's registers (qgemm::gemm_rows_u8s8_q8): an 8-bit output
  // in NHWC without a residual, the activation none / ReLU / Clip. Per group, mult and the bias padded
  // to whole panels (zeros past its channels), `padded` floats a group.
  bool requant = false;
  int64_t padded = 0;
  std::vector<float> mult_pad, bias_pad;
};

// The qgemm::Requant of a node's 8-bit output (the fields but the arrays and y).
qgemm::Requant requant_of(const QuantizedConv2DParams& p) {
  qgemm::Requant rq;
  const Activation& a = p.conv.activation;
  const bool clip = a.kind == ActivationKind::Clip;
  rq.act_lo = clip ? a.alpha : a.kind == ActivationKind::Relu ? 0.f : -INFINITY;
  rq.act_hi = clip ? a.beta : INFINITY;
  rq.scale = p.y_scale;
  const bool i8 = p.y_dtype == DType::I8;
  rq.shift = p.y_zero_point + (i8 ? 128 : 0);
  rq.flip = i8 ? 0x80 : 0;
  return rq;
}

std::shared_ptr<void> prepare(const NodeDesc& node) {
  const auto& p = std::get<QuantizedConv2DParams>(node.params);
  const QDims d = qdims(node);
  const float* w = node.constants[1];
  const float* ws = node.constants[2];
  if (!w || !ws) throw Error("cpu quantized_conv2d.qgemm: the weight and its scale must be constants");
  auto prep = std::make_shared<Prepared>();
  quant::check_int8_weights(w, d.CO * d.depth, "cpu quantized_conv2d.qgemm");
  // per group, the weight as int8 rows in the im2col order
  std::vector<int8_t> wq(static_cast<size_t>(d.G * d.Kg * d.depth));
  for (int64_t gi = 0; gi < d.G; ++gi)
    for (int64_t k = 0; k < d.Kg; ++k)
      for (int64_t c = 0; c < d.Cg; ++c)
        for (int64_t t = 0; t < d.KH * d.KW; ++t) {
          const float v = w[((gi * d.Kg + k) * d.Cg + c) * d.KH * d.KW + t];
          const int64_t col = d.nhwc ? t * d.Cg + c : c * d.KH * d.KW + t;
          wq[static_cast<size_t>((gi * d.Kg + k) * d.depth + col)] = static_cast<int8_t>(v);
        }
  prep->u8s8 = qgemm::fits_u8s8(wq.data(), int64_t(wq.size()), node.isa);
  prep->zero_u8 = static_cast<uint8_t>(p.x_zero_point + (p.x_dtype == DType::I8 ? 128 : 0));
  for (int64_t gi = 0; gi < d.G; ++gi) {
    const int8_t* wg = wq.data() + gi * d.Kg * d.depth;
    if (prep->u8s8)
      prep->b8.push_back(qgemm::pack_b_u8s8(wg, d.Kg, d.depth, d.depth, prep->zero_u8, node.isa));
    else
      prep->b.push_back(qgemm::pack_b(wg, d.Kg, d.depth, d.depth, node.isa));
  }
  prep->mult.resize(static_cast<size_t>(d.CO));
  quant::scale_multipliers(ws, node.input_shapes[2][0] != 1, p.x_scale, d.CO, prep->mult.data(),
                           "cpu quantized_conv2d.qgemm");
  const float* bias = node.constants.size() > 3 ? node.constants[3] : nullptr;
  prep->requant = prep->u8s8 && d.q_direct && bias;
  if (prep->requant) {
    prep->padded = d.panels * d.nr;
    prep->mult_pad.assign(size_t(d.G * prep->padded), 0.f);
    prep->bias_pad.assign(size_t(d.G * prep->padded), 0.f);
    for (int64_t gi = 0; gi < d.G; ++gi)
      for (int64_t k = 0; k < d.Kg; ++k) {
        prep->mult_pad[size_t(gi * prep->padded + k)] = prep->mult[size_t(gi * d.Kg + k)];
        prep->bias_pad[size_t(gi * prep->padded + k)] = bias[gi * d.Kg + k];
      }
  }
  return prep;
}

// x -> (q - zero point) as int16, quantize_linear's arithmetic (quantize.h), compiled per level.
template <class I>
INFER_INLINE void quantize_input_body(const float* x, int64_t n, float scale, float zero, float lo, float hi,
                                      int16_t* out) {
  quant::quantize_row_i16<I>(x, n, scale, zero, lo, hi, out);
}
INFER_PER_ISA(void, quantize_input, quantize_input_body,
              (const float* x, int64_t n, float scale, float zero, float lo, float hi, int16_t* out),
              (x, n, scale, zero, lo, hi, out))
// x -> q (+ 128 for an int8 type) as uint8: the u8s8 form's input.
template <class I>
INFER_INLINE void quantize_input_u8_body(const float* x, int64_t n, float scale, float zero, float lo, float hi,
                                         float offset, uint8_t* out) {
  quant::quantize_row_u8<I>(x, n, scale, zero, lo, hi, offset, out);
}
INFER_PER_ISA(void, quantize_input_u8, quantize_input_u8_body,
              (const float* x, int64_t n, float scale, float zero, float lo, float hi, float offset, uint8_t* out),
              (x, n, scale, zero, lo, hi, offset, out))
// An 8-bit input (x_quantized): (q - zero point) as int16, or an int8 type's q + 128 (its bits ^ 0x80)
// as the u8s8 form's uint8 (a uint8 input is that form's A as it is).
template <class I>
INFER_INLINE void widen_input_body(const uint8_t* q, int64_t n, DType type, int32_t zero, int16_t* out) {
  quant::widen_row_i16<I>(q, n, type, zero, out);
}
INFER_PER_ISA(void, widen_input, widen_input_body,
              (const uint8_t* q, int64_t n, DType type, int32_t zero, int16_t* out), (q, n, type, zero, out))
template <class I>
INFER_INLINE void flip_input_body(const uint8_t* q, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = q[i] ^ 0x80;
}
INFER_PER_ISA(void, flip_input, flip_input_body, (const uint8_t* q, int64_t n, uint8_t* out), (q, n, out))

// n bytes from src to dst: two overlapping moves of 4, 8 or 16 bytes for 4 .. 32 (a stem's kernel row of 3
// channels is 9 bytes in the u8s8 form, 21 for a 7x7: a byte loop there took the int8 stem conv to twice
// the fp32 one's time), bytes below 4, a library call beyond 32.
template <size_t B>
INFER_INLINE void copy_two(char* d, const char* s, size_t n) {
  char a[B], b[B];
  std::memcpy(a, s, B);
  std::memcpy(b, s + n - B, B);
  std::memcpy(d, a, B);
  std::memcpy(d + n - B, b, B);
}
inline void copy_bytes(void* dst, const void* src, size_t n) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (n > 32)
    std::memcpy(d, s, n);
  else if (n >= 16)
    copy_two<16>(d, s, n);
  else if (n >= 8)
    copy_two<8>(d, s, n);
  else if (n >= 4)
    copy_two<4>(d, s, n);
  else
    for (; n > 0; --n) *d++ = *s++;
}

// p[0 .. n) = v: a loop for the few elements of a row's tail or a padding run (std::fill of bytes is a
// memset call, several a row), std::fill beyond.
template <class T>
inline void fill_short(T* p, int64_t n, T v) {
  if (n > 32) {
    std::fill(p, p + n, v);
    return;
  }
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}

// Rows m0 .. m0+rows-1 (output pixels of image n, group gi) im2col'd as rows of ld elements T
// (row-major A of qgemm::gemm_rows: int16 q - zero point, ld 2 * pairs; of gemm_rows_u8s8: uint8 q,
// ld 4 * quads). Taps in the padding hold `pad` (the quantized zero: 0 as int16, the zero point as
// uint8), k past the depth 0 (their weights are 0).
template <class T>
void im2col_rows(const QDims& d, const T* xq, int64_t n, int64_t gi, int64_t m0, int64_t rows, T pad, int64_t ld,
                 T* out) {
  int64_t oy = m0 / d.WO, ox = m0 % d.WO;  // stepped along the rows: no division a row
  for (int64_t r = 0; r < rows; ++r, ox = ox + 1 == d.WO ? 0 : ox + 1, oy += ox == 0) {
    T* row = out + r * ld;
    fill_short(row + d.depth, ld - d.depth, T(0));
    for (int64_t ky = 0; ky < d.KH; ++ky) {
      const int64_t iy = oy * d.sh - d.pt + ky * d.dh;
      const bool y_in = iy >= 0 && iy < d.H;
      if (d.nhwc && d.G == 1 && d.dw == 1) {
        // one group, undilated: a kernel row's taps are KW neighbouring pixels, contiguous in NHWC, so
        // the taps inside the image are one copy (a stem's 3 channels: 3 or 7 taps in one)
        T* dst = row + ky * d.KW * d.Cg;
        const int64_t ix0 = ox * d.sw - d.pl;
        const int64_t lo = y_in ? std::clamp<int64_t>(-ix0, 0, d.KW) : d.KW;
        const int64_t hi = y_in ? std::clamp<int64_t>(d.W - ix0, lo, d.KW) : d.KW;
        fill_short(dst, lo * d.Cg, pad);
        const int64_t count = (hi - lo) * d.Cg;
        if (count > 0) copy_bytes(dst + lo * d.Cg, xq + ((n * d.H + iy) * d.W + ix0 + lo) * d.C, size_t(count) * sizeof(T));
        fill_short(dst + hi * d.Cg, (d.KW - hi) * d.Cg, pad);
        continue;
      }
      for (int64_t kx = 0; kx < d.KW; ++kx) {
        const int64_t ix = ox * d.sw - d.pl + kx * d.dw;
        const bool in = y_in && ix >= 0 && ix < d.W;
        if (d.nhwc) {
          T* dst = row + (ky * d.KW + kx) * d.Cg;
          if (in)
            std::memcpy(dst, xq + ((n * d.H + iy) * d.W + ix) * d.C + gi * d.Cg, size_t(d.Cg) * sizeof(T));
          else
            std::fill(dst, dst + d.Cg, pad);
        } else {
          T* dst = row + ky * d.KW + kx;
          const int64_t plane = d.H * d.W;
          if (in) {
            const T* src = xq + ((n * d.C + gi * d.Cg) * d.H + iy) * d.W + ix;
            for (int64_t c = 0; c < d.Cg; ++c) dst[c * d.KH * d.KW] = src[c * plane];
          } else {
            for (int64_t c = 0; c < d.Cg; ++c) dst[c * d.KH * d.KW] = pad;
          }
        }
      }
    }
  }
}

// An 8-bit output (y_dtype U8 / I8): where it goes, its quantize_linear, and the thread's float tile
// [rows][kn] the epilogue writes first (so the values are the float output's, quantized as its reader
// would), quantized at once where its rows are contiguous in y (all the channels: NHWC, no split).
struct QOut {
  uint8_t* y = nullptr;  // nullptr: the output is float
  float scale = 1.f, zero = 0.f;
  DType type = DType::U8;
  float* tile = nullptr;
};

// The NHWC epilogue of an 8-bit output with no residual and the activation none, ReLU or Clip (MobileNet's
// and ResNet's int8 convolutions inside a block), in registers: per vector of channels float(acc) * mult
// + bias (the float epilogue's expression, so the same contraction into an FMA where the level has one),
// the activation's clamp, quantize.h's quantize_i32 rounding, then the bytes, four vectors a store: no
// float tile written and read back, no separate activation pass.
template <class I>
INFER_INLINE void epilogue_q8_body(const QDims& d, const int32_t* c, const float* mult, const float* bias,
                                   const Activation& act, const QOut& q, int64_t n, int64_t m0, int64_t m1,
                                   int64_t k0, int64_t kn) {
  using V = typename I::Vec;
  using IV = typename quant::I32Of<V>::type;
  constexpr int L = I::kLanes;
  float qlo, qhi;
  quant::range_of(q.type, qlo, qhi);
  const bool i8 = q.type == DType::I8;
  const V vs = V{} + q.scale;
  const IV lo = IV{} + int32_t(qlo - q.zero), hi = IV{} + int32_t(qhi - q.zero);
  const IV shift = IV{} + (int32_t(q.zero) + (i8 ? 128 : 0));  // q + 128 for an int8 type: [0, 255]
  const bool clip = act.kind == ActivationKind::Clip, bounded = clip || act.kind == ActivationKind::Relu;
  const V alo = V{} + (clip ? act.alpha : 0.f), ahi = V{} + (clip ? act.beta : 0.f);
  const auto vec = [&](const int32_t* a, const float* m, const float* b) __attribute__((always_inline)) {
    IV av;
    V mv, bv;
    std::memcpy(&av, a, sizeof av);
    std::memcpy(&mv, m, sizeof mv);
    std::memcpy(&bv, b, sizeof bv);
    V v = __builtin_convertvector(av, V) * mv + bv;
    if (bounded) v = quant::max_keep_nan<I>(alo, v);
    if (clip) v = quant::min_keep_nan<I>(ahi, v);
    return quant::quantize_i32v<I>(v, vs, lo, hi) + shift;
  };
  const float* mk = mult + k0;
  const float* bk = bias + k0;
  for (int64_t m = m0; m < m1; ++m) {
    const int32_t* cr = c + (m - m0) * kn;
    uint8_t* yo = q.y + (n * d.M + m) * d.CO + k0;
    int64_t k = 0;
    for (; k + 4 * L <= kn; k += 4 * L)
      quant::store_u8x4<I>(vec(cr + k, mk + k, bk + k), vec(cr + k + L, mk + k + L, bk + k + L),
                           vec(cr + k + 2 * L, mk + k + 2 * L, bk + k + 2 * L),
                           vec(cr + k + 3 * L, mk + k + 3 * L, bk + k + 3 * L), yo + k);
    for (; k + L <= kn; k += L) quant::store_u8x1<I>(vec(cr + k, mk + k, bk + k), yo + k, L);
    if (k < kn) {  // the last 1 .. L-1 channels through padded copies
      int32_t ta[L] = {};
      float tm[L] = {}, tb[L] = {};
      for (int64_t j = k; j < kn; ++j) ta[j - k] = cr[j], tm[j - k] = mk[j], tb[j - k] = bk[j];
      quant::store_u8x1<I>(vec(ta, tm, tb), yo + k, kn - k);
    }
    if (i8)
      for (int64_t j = 0; j < kn; ++j) yo[j] ^= 0x80;  // q + 128 -> q's bits
  }
}

// The epilogue of rows m0 .. m1-1, channels k0 .. k0+kn-1 of image n: c int32 [m1-m0][kn] -> y float
// (or through q.tile into q.y's bytes; NHWC without a residual, activation none / ReLU / Clip: in
// registers, epilogue_q8_body).
template <class I>
INFER_INLINE void epilogue_body(const QDims& d, const int32_t* c, const float* mult, const float* bias,
                                const float* residual, const Activation& act, float* y, const QOut& q, int64_t n,
                                int64_t m0, int64_t m1, int64_t k0, int64_t kn) {
  if (d.q_direct) {
    epilogue_q8_body<I>(d, c, mult, bias, act, q, n, m0, m1, k0, kn);
    return;
  }
  if (d.nhwc) {
    for (int64_t m = m0; m < m1; ++m) {
      const int32_t* cr = c + (m - m0) * kn;
      const int64_t at = (n * d.M + m) * d.CO + k0;
      float* yr = q.y ? q.tile + (m - m0) * kn : y + at;
      for (int64_t k = 0; k < kn; ++k) yr[k] = static_cast<float>(cr[k]) * mult[k0 + k] + bias[k0 + k];
      if (residual)
        for (int64_t k = 0; k < kn; ++k) yr[k] += residual[at + k];
      activate_row<I>(yr, kn, act);
      if (q.y && kn != d.CO) quant::quantize_row_q8<I>(yr, kn, q.scale, q.zero, q.type, q.y + at);
    }
    if (q.y && kn == d.CO)
      quant::quantize_row_q8<I>(q.tile, (m1 - m0) * kn, q.scale, q.zero, q.type, q.y + (n * d.M + m0) * d.CO);
  } else {
    for (int64_t k = 0; k < kn; ++k) {
      const int64_t at = (n * d.CO + k0 + k) * d.M;
      float* yr = q.y ? q.tile - m0 : y + at;  // yr[m0 .. m1-1]
      const float mk = mult[k0 + k], bk = bias[k0 + k];
      for (int64_t m = m0; m < m1; ++m) yr[m] = static_cast<float>(c[(m - m0) * kn + k]) * mk + bk;
      if (residual)
        for (int64_t m = m0; m < m1; ++m) yr[m] += residual[at + m];
      activate_row<I>(yr + m0, m1 - m0, act);
      if (q.y) quant::quantize_row_q8<I>(yr + m0, m1 - m0, q.scale, q.zero, q.type, q.y + at + m0);
    }
  }
}
INFER_PER_ISA(void, epilogue, epilogue_body,
              (const QDims& d, const int32_t* c, const float* mult, const float* bias, const float* residual,
               const Activation& act, float* y, const QOut& q, int64_t n, int64_t m0, int64_t m1, int64_t k0,
               int64_t kn),
              (d, c, mult, bias, residual, act, y, q, n, m0, m1, k0, kn))

size_t workspace(const NodeDesc& node) { return qdims(node).workspace(); }

void run(const KernelCall& call) {
  const auto& p = std::get<QuantizedConv2DParams>(call.node.params);
  const auto* prep = static_cast<const Prepared*>(call.prepared);
  if (!prep) throw Error("cpu quantized_conv2d.qgemm: not prepared for this node");
  if (!call.workspace) throw Error("cpu quantized_conv2d.qgemm: needs a workspace, got none");
  const QDims d = qdims(call.node);
  auto* ws = static_cast<char*>(call.workspace);
  auto* xq = reinterpret_cast<int16_t*>(ws);
  const bool u8s8 = prep->u8s8;
  // the u8s8 form's input: a uint8 input's own bytes, else quantized (or flipped) into the workspace
  const bool x8 = p.x_quantized;
  const auto* x_bytes = reinterpret_cast<const uint8_t*>(call.inputs[0]);
  const uint8_t* xq8 = x8 && p.x_dtype == DType::U8 ? x_bytes : reinterpret_cast<uint8_t*>(ws);
  char* slots = ws + d.xq_bytes();
  // the u8s8 form reads the input in place in k-quads: whole quads of channels, 4-byte aligned
  const bool in_place = d.in_place && (!u8s8 || (d.C % 4 == 0 && d.Cg % 4 == 0));
  const int64_t ld8 = 4 * ((d.depth + 3) / 4);
  const float* bias = call.inputs[3];
  const float* residual = p.conv.add_residual ? call.inputs[4] : nullptr;
  float* y = call.outputs[0];
  const Activation act = p.conv.activation;
  const bool parallel = d.N * d.M * d.CO * d.depth >= kParallelMin;
  const auto finish = epilogue_for(call.node.isa);
  qgemm::Requant rq = requant_of(p);
  rq.ldy = d.CO;

  // 1. the input, quantized once (in chunks of 4096 elements)
  constexpr int64_t kChunk = 4096;
  const int64_t nx = d.N * d.C * d.H * d.W;
  float qlo, qhi;
  quant::range_of(p.x_dtype, qlo, qhi);
  const auto quantize = quantize_input_for(call.node.isa);
  const auto quantize_u8 = quantize_input_u8_for(call.node.isa);
  const auto widen = widen_input_for(call.node.isa);
  const auto flip = flip_input_for(call.node.isa);
  const float offset = p.x_dtype == DType::I8 ? 128.f : 0.f;
  auto* xq8w = reinterpret_cast<uint8_t*>(ws);
  if (!(x8 && u8s8 && p.x_dtype == DType::U8))
    parallel_for((nx + kChunk - 1) / kChunk, parallel, [&](int64_t b, int64_t e, int) {
      const int64_t lo = b * kChunk, hi = std::min(nx, e * kChunk);
      if (x8 && u8s8)
        flip(x_bytes + lo, hi - lo, xq8w + lo);
      else if (x8)
        widen(x_bytes + lo, hi - lo, p.x_dtype, p.x_zero_point, xq + lo);
      else if (u8s8)
        quantize_u8(call.inputs[0] + lo, hi - lo, p.x_scale, float(p.x_zero_point), qlo, qhi, offset, xq8w + lo);
      else
        quantize(call.inputs[0] + lo, hi - lo, p.x_scale, float(p.x_zero_point), qlo, qhi, xq + lo);
    });
  // 2. per (image, group, block of output pixels): im2col, multiply, finish, in the thread's slot
  const int64_t items = d.N * d.G * d.blocks * d.splits;
  parallel_for(
      items, parallel,
      [&](int64_t b, int64_t e, int t) {
        char* slot = slots + size_t(t) * d.slot_bytes();
        auto* rows = reinterpret_cast<int16_t*>(slot);
        auto* c = reinterpret_cast<int32_t*>(slot + d.a_bytes());
        QOut q;
        if (d.q_out) {
          q.y = reinterpret_cast<uint8_t*>(call.outputs[0]);
          q.scale = p.y_scale, q.zero = float(p.y_zero_point), q.type = p.y_dtype;
          q.tile = reinterpret_cast<float*>(slot + d.a_bytes() + d.c_bytes());
        }
        for (int64_t it = b; it < e; ++it) {
          const int64_t s = it % d.splits, blk = it / d.splits;
          const int64_t n = blk / (d.G * d.blocks), gi = (blk / d.blocks) % d.G, rb = blk % d.blocks;
          const int64_t m0 = rb * d.mb, m1 = std::min(d.M, m0 + d.mb);
          const int64_t j0 = s * d.per_split, j1 = std::min(d.panels, j0 + d.per_split);
          const int64_t k0 = j0 * d.nr, kn = std::min(d.Kg, j1 * d.nr) - k0;
          if (u8s8) {
            const qgemm::PackedB8& w = prep->b8[static_cast<size_t>(gi)];
            const uint8_t* a8 = xq8 + (n * d.M + m0) * d.C + gi * d.Cg;
            int64_t lda8 = d.C;
            if (!in_place) {
              auto* rows8 = reinterpret_cast<uint8_t*>(slot);
              im2col_rows<uint8_t>(d, xq8, n, gi, m0, m1 - m0, prep->zero_u8, ld8, rows8);
              a8 = rows8, lda8 = ld8;
            }
            if (prep->requant) {  // straight to the 8-bit output: no int32 tile, no epilogue pass
              qgemm::Requant r = rq;
              r.mult = prep->mult_pad.data() + gi * prep->padded;
              r.bias = prep->bias_pad.data() + gi * prep->padded;
              r.y = q.y + (n * d.M + m0) * d.CO + gi * d.Kg + k0;
              qgemm::gemm_rows_u8s8_q8(a8, lda8, m1 - m0, w, r, j0, j1);
              continue;
            }
            qgemm::gemm_rows_u8s8(a8, lda8, m1 - m0, w, c, kn, j0, j1);
          } else {
            const qgemm::PackedB& w = prep->b[static_cast<size_t>(gi)];
            if (in_place) {
              const int16_t* a = xq + (n * d.M + m0) * d.C + gi * d.Cg;
              qgemm::gemm_rows(reinterpret_cast<const int32_t*>(a), d.C / 2, m1 - m0, w, c, kn, j0, j1);
            } else {
              im2col_rows<int16_t>(d, xq, n, gi, m0, m1 - m0, 0, 2 * d.pairs, rows);
              qgemm::gemm_rows(reinterpret_cast<const int32_t*>(rows), d.pairs, m1 - m0, w, c, kn, j0, j1);
            }
          }
          finish(d, c, prep->mult.data(), bias, residual, act, y, q, n, m0, m1, gi * d.Kg + k0, kn);
        }
      },
      static_cast<int>(d.slots));
}

}  // namespace

INFER_REGISTER_KERNELS(quantized_conv2d) {
  // NHWC ranks higher: its im2col reads a pixel's channels contiguously (the channels_last pass then
  // switches a quantized graph to NHWC at its first quantized_conv2d)
  registry.add("cpu", {{.op = "quantized_conv2d", .name = "qgemm", .priority = 10,
                        .priority_for = [](const NodeDesc& d) { return d.layout == Layout::NHWC ? 11 : 10; },
                        .layouts = {Layout::NCHW, Layout::NHWC},
                        .isa = KernelVariant::Isa::PerIsa,
                        .applicable = applicable,
                        .workspace_bytes = workspace,
                        .prepare = prepare,
                        .run = run}});
}

}  // namespace infer::cpu
