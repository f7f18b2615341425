// CUDA conv_pool2d (conv, then p x p average pooling at stride p; Tokura et al.'s fusion) through
// cuDNN (kernels/cuda/cudnn.h) in NCHW or NHWC: on tensor cores in fp16 / tf32, an implicit GEMM with
// no column buffer. Two variants, the same two methods as gemm.cu's (this folder):
// - `cudnn_direct_sum`: the k x k kernel at stride p*s over the box sums B of the padded input. One
//   pass writes B (each element the float sum of its p x p cells times 1/p^2, zeros outside the image)
//   into the workspace, then cuDNN convolves B: k^2 * C_in multiply-adds per pooled output.
// - `cudnn_fused_filter`: the pre-convolved ((p-1)*s + k)^2 filter (kernels/conv_shapes.h) at stride
//   p*s straight over the input, no extra pass; symmetric padding only (cuDNN's descriptors).
// Bias + activation: dnn::forward_epilogue (bias + ReLU inside cuDNN's call).
#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/im2col.cuh"

namespace infer::cuda {
namespace {

// B [N][Hb][Wb][C] (NHWC) or [N][C][Hb][Wb]: B[a][b] = (1/p^2) * sum_{dy,dx < p} x[a + dy*sh - pt]
// [b + dx*sw - pl], 0 outside the image, so pooled output (py, px) is the plain convolution of B at
// (py*p*sh, px*p*sw) with no padding. Where a pooled output's KH rows of B do not overlap the next
// one's (KH <= p*sh: a 1x1 conv, DenseNet's transitions), only those rows are stored, row py*KH + ky
// standing for a = py*p*sh + ky (kr = KH; 0: every row), and B is convolved at stride KH: for 1x1,
// the pooled input and a plain GEMM. Columns likewise (kc). One block per line of B (grid-stride) and
// its threads along the line's contiguous index: a pixel's channels in NHWC, a row's columns in NCHW,
// so the index arithmetic is per line and the loads coalesce.
template <class T, bool kNhwc>
__global__ void box_sum_kernel(const T* __restrict__ x, T* __restrict__ b, int64_t lines, int64_t C, int64_t H,
                               int64_t W, int64_t Hb, int64_t Wb, int P, int sh, int sw, int pt, int pl,
                               int kr, int kc, float scale) {
  const int64_t inner = kNhwc ? C : Wb;
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    int64_t n, c = 0, a, col = 0;
    if constexpr (kNhwc) {
      col = line % Wb, a = (line / Wb) % Hb, n = line / (Wb * Hb);
    } else {
      a = line % Hb, c = (line / Hb) % C, n = line / (Hb * C);
    }
    if (kr) a = a / kr * (int64_t(P) * sh) + a % kr;  // windows apart: row (py, ky) of B
    T* out = b + line * inner;
    for (int64_t e = threadIdx.x; e < inner; e += blockDim.x) {
      if constexpr (kNhwc) c = e; else col = e;
      int64_t cx = col;
      if (kc) cx = cx / kc * (int64_t(P) * sw) + cx % kc;
      float s = 0.f;
      for (int dy = 0; dy < P; ++dy) {
        const int64_t iy = a + int64_t(dy) * sh - pt;
        if (iy < 0 || iy >= H) continue;
        for (int dx = 0; dx < P; ++dx) {
          const int64_t ix = cx + int64_t(dx) * sw - pl;
          if (ix < 0 || ix >= W) continue;
          s += to_float(kNhwc ? x[((n * H + iy) * W + ix) * C + c] : x[((n * C + c) * H + iy) * W + ix]);
        }
      }
      out[e] = from_float<T>(s * scale);
    }
  }
}

enum class Method { DirectSum, FusedFilter };

// The node as a cuDNN forward problem for `method` (ok = false where it is not one): direct_sum
// convolves B (Hb x Wb, no padding), fused_filter the input with the pre-convolved filter.
struct Geometry {
  bool ok = false;
  ConvPool2DDims d{};
  dnn::Problem problem;
  int64_t Hb = 0, Wb = 0;  // direct_sum's box-sum image
  int kr = 0, kc = 0;      // direct_sum: rows / columns of B kept per pooled output (0: all)
};

Geometry geometry(const NodeDesc& node, Method method) {
  Geometry g;
  if (!conv_pool2d_valid(node) || !has_constant_weight(node)) return g;
  const ConvPool2DDims d = conv_pool2d_dims(node, "cuda");
  for (int64_t v : {d.N, d.CI, d.H, d.W, d.CO, d.PH, d.PW})
    if (v <= 0 || v > INT_MAX) return g;
  dnn::Problem& q = g.problem;
  q.precision = node.precision;
  q.layout = node.layout;
  q.N = d.N, q.C = d.CI, q.K = d.CO, q.P = d.PH, q.Q = d.PW;
  q.stride_h = d.P * d.sh, q.stride_w = d.P * d.sw;
  if (method == Method::DirectSum) {
    g.kr = d.KH <= d.P * d.sh ? int(d.KH) : 0;  // box_sum_kernel's kr, kc: windows apart
    g.kc = d.KW <= d.P * d.sw ? int(d.KW) : 0;
    g.Hb = g.kr ? d.PH * d.KH : (d.PH - 1) * d.P * d.sh + d.KH;
    g.Wb = g.kc ? d.PW * d.KW : (d.PW - 1) * d.P * d.sw + d.KW;
    if (g.kr) q.stride_h = g.kr;
    if (g.kc) q.stride_w = g.kc;
    q.H = g.Hb, q.W = g.Wb, q.R = d.KH, q.S = d.KW;
  } else {
    const Padding2D& pad = d.p->conv.pad;
    if (pad.top != pad.bottom || pad.left != pad.right) return g;
    q.H = d.H, q.W = d.W, q.R = (d.P - 1) * d.sh + d.KH, q.S = (d.P - 1) * d.sw + d.KW;
    q.pad_h = d.pt, q.pad_w = d.pl;
    // cuDNN's own output size must be the pooled one (true for floor pooling with symmetric padding)
    if (q.H + 2 * q.pad_h < q.R || q.W + 2 * q.pad_w < q.S ||
        (q.H + 2 * q.pad_h - q.R) / q.stride_h + 1 != q.P || (q.W + 2 * q.pad_w - q.S) / q.stride_w + 1 != q.Q)
      return g;
  }
  g.d = d;
  g.ok = true;
  return g;
}

bool direct_sum_applicable(const NodeDesc& node) { return geometry(node, Method::DirectSum).ok; }
bool fused_filter_applicable(const NodeDesc& node) { return geometry(node, Method::FusedFilter).ok; }

// Measured (H100, infer-bench op, 2026-11-25; the NHWC times include the single node's two layout
// conversions): on tensor cores at batch 64 cudnn_fused_filter beats every NCHW variant - conv3x3 +
// avgpool2 512 -> 512 at 32x32 fp16 0.336 ms vs fused_filter 0.362 (tf32 0.513 vs 1.166), 256 -> 128 at
// 28x28 fp16 0.085 vs 0.177, DenseNet's 1x1 1024 -> 512 at 14x14 0.089 vs unfused 0.093 - so it is the
// NHWC default with aligned channels from batch 4 (where conv2d.cudnn makes the graph NHWC). At batch
// 1 the NCHW fused_filter stays ahead (0.017 vs 0.039 ms). cudnn_direct_sum never led (the box-sum
// pass and cuDNN's strided convolution cost more than the fused filter's extra tensor-core FLOPs:
// 3x3 512 at batch 64 fp16 0.776 ms; 1x1 512 -> 256 at 28x28 0.243-0.407 vs 0.137 ms): an
// --autotune candidate, as are both in strict fp32 (where cuDNN lost on 512 channels: 4.56 vs 2.25 ms).
int priority(const NodeDesc& node, Method method) {
  const Geometry g = geometry(node, method);
  if (!g.ok) return 0;
  const int64_t a = dnn::channel_alignment(node.precision);
  const bool tensor_cores = node.precision != Precision::FP32 && g.d.CI % a == 0 && g.d.CO % a == 0;
  if (method == Method::FusedFilter && node.layout == Layout::NHWC && tensor_cores && g.d.N >= 4) return 30;
  return 2;
}
int direct_sum_priority(const NodeDesc& node) { return priority(node, Method::DirectSum); }
int fused_filter_priority(const NodeDesc& node) { return priority(node, Method::FusedFilter); }

size_t box_bytes(const Geometry& g) {
  return static_cast<size_t>(g.d.N * g.d.CI * g.Hb * g.Wb) * element_size(g.problem.precision);
}

size_t direct_sum_workspace(const NodeDesc& node) {
  const Geometry g = geometry(node, Method::DirectSum);
  return g.ok ? align256(box_bytes(g)) + dnn::workspace_bytes(g.problem) : 0;
}

size_t fused_filter_workspace(const NodeDesc& node) {
  const Geometry g = geometry(node, Method::FusedFilter);
  return g.ok ? dnn::workspace_bytes(g.problem) : 0;
}

struct State {
  Method method = Method::DirectSum;
  Geometry g;
  std::unique_ptr<dnn::Conv> conv;
  std::unique_ptr<DeviceArray> weights;  // KCRS (NCHW) or KRSC (NHWC), the fused filter or the node's
};

std::shared_ptr<void> prepare(const NodeDesc& node, Method method, const char* name) {
  auto st = std::make_shared<State>();
  st->method = method;
  st->g = geometry(node, method);
  if (!st->g.ok) throw Error(std::string("cuda conv_pool2d.") + name + ": the node is not one cuDNN takes");
  const ConvPool2DDims& d = st->g.d;
  const dnn::Problem& q = st->g.problem;
  std::vector<float> kcrs;
  if (method == Method::FusedFilter) {
    int64_t kh = 0, kw = 0;
    kcrs = conv_pool2d_fused_filter(d, node.constants[1], kh, kw);
  } else {
    kcrs.assign(node.constants[1], node.constants[1] + d.CO * d.CI * d.KH * d.KW);
  }
  if (q.layout == Layout::NHWC) {
    std::vector<float> krsc(kcrs.size());
    krsc_from_kcrs(kcrs.data(), q.K, q.C, q.R, q.S, krsc.data());
    kcrs.swap(krsc);
  }
  st->weights = upload(kcrs.data(), kcrs.size(), node.precision);
  st->conv = std::make_unique<dnn::Conv>(q);
  return st;
}

std::shared_ptr<void> direct_sum_prepare(const NodeDesc& node) {
  return prepare(node, Method::DirectSum, "cudnn_direct_sum");
}
std::shared_ptr<void> fused_filter_prepare(const NodeDesc& node) {
  return prepare(node, Method::FusedFilter, "cudnn_fused_filter");
}

void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda conv_pool2d.cudnn_*: not prepared");
  const State& st = *static_cast<const State*>(call.prepared);
  if (call.inputs.size() != call.node.input_shapes.size() || call.outputs.size() != 1 || !call.inputs[0] ||
      !call.outputs[0])
    throw Error("cuda conv_pool2d.cudnn_*: call has the wrong inputs or outputs");
  Context& ctx = context_of(call);
  const Geometry& g = st.g;
  const ConvPool2DDims& d = g.d;
  const void* bias = call.inputs.size() == 3 ? call.inputs[2] : nullptr;
  const Activation& act = d.p->conv.activation;
  if (st.method == Method::FusedFilter) {
    dnn::forward_epilogue(ctx, *st.conv, call.inputs[0], st.weights->data(), bias, act, call.outputs[0],
                          call.workspace);
    return;
  }
  if (!call.workspace) throw Error("cuda conv_pool2d.cudnn_direct_sum: missing workspace");
  void* box = call.workspace;
  void* conv_ws = static_cast<char*>(call.workspace) + align256(box_bytes(g));
  const bool nhwc = call.node.layout == Layout::NHWC;
  const int64_t lines = nhwc ? d.N * g.Hb * g.Wb : d.N * d.CI * g.Hb, inner = nhwc ? d.CI : g.Wb;
  const int threads = int(std::min<int64_t>(256, (inner + 31) / 32 * 32));
  const unsigned blocks = unsigned(std::min<int64_t>(lines, int64_t(1) << 20));
  const float scale = 1.f / float(d.P * d.P);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const auto* x = static_cast<const T*>(static_cast<const void*>(call.inputs[0]));
    auto* b = static_cast<T*>(box);
    if (nhwc)
      box_sum_kernel<T, true><<<blocks, threads, 0, ctx.stream>>>(
          x, b, lines, d.CI, d.H, d.W, g.Hb, g.Wb, int(d.P), d.sh, d.sw, d.pt, d.pl, g.kr, g.kc, scale);
    else
      box_sum_kernel<T, false><<<blocks, threads, 0, ctx.stream>>>(
          x, b, lines, d.CI, d.H, d.W, g.Hb, g.Wb, int(d.P), d.sh, d.sw, d.pt, d.pl, g.kr, g.kc, scale);
  });
  INFER_CUDA_CHECK_LAUNCH();
  dnn::forward_epilogue(ctx, *st.conv, box, st.weights->data(), bias, act, call.outputs[0], conv_ws);
}

}  // namespace

INFER_REGISTER_KERNELS(conv_pool2d_cudnn) {
  registry.add("cuda", {
      {.op = "conv_pool2d", .name = "cudnn_direct_sum", .priority = 3, .priority_for = direct_sum_priority,
       .layouts = {Layout::NCHW, Layout::NHWC}, .applicable = direct_sum_applicable,
       .workspace_bytes = direct_sum_workspace, .prepare = direct_sum_prepare, .run = run},
      {.op = "conv_pool2d", .name = "cudnn_fused_filter", .priority = 2, .priority_for = fused_filter_priority,
       .layouts = {Layout::NCHW, Layout::NHWC}, .applicable = fused_filter_applicable,
       .workspace_bytes = fused_filter_workspace, .prepare = fused_filter_prepare, .run = run},
  });
}

}  // namespace infer::cuda
