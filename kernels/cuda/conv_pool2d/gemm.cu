// CUDA fused conv + p x p average pooling (stride p, floor; activation after the pooling), Tokura et
// al.: both are linear, so the pair is one strided linear map. As kernels/cpu/conv_pool2d.cc:
// unfused (conv via im2col + GEMM into the workspace, then a pool + bias + act kernel), fused_filter
// (the ((p-1)*s + k)^2 pre-convolved filter / p^2 at stride p*s via im2col + GEMM), direct_sum (the
// k x k kernel at stride p*s over box sums of the padded input: one im2col that gathers the p x p
// sums straight into the columns, then the GEMM with alpha = 1/p^2).
#include <algorithm>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/im2col.cuh"

namespace infer::cuda {
namespace {

// The node's validated sizes (kernels/conv_shapes.h), shared with the cpu kernels.
// HC x WC is the conv's own output, PH x PW the pooled output, P the pool size.
using PoolDims = ConvPool2DDims;
PoolDims pool_dims(const NodeDesc& node) { return conv_pool2d_dims(node, "cuda"); }

bool valid_node(const NodeDesc& node) { return conv_pool2d_valid(node); }

bool valid_with_constant_weight(const NodeDesc& node) { return valid_node(node) && has_constant_weight(node); }

// Counts and null pointers were checked by check_kernel_call.
using PoolCall = ConvLikeCall<PoolDims, void>;
PoolCall pool_call(const KernelCall& call) { return conv_like_call<void>(call, pool_dims(call.node)); }

// ---- unfused ------------------------------------------------------------------------------------
// Only the PH*p x PW*p conv outputs that some pooling window reads are computed (the floor-dropped
// partial window costs nothing). Per chunk of images: conv plane [n][CO][PH*p][PW*p] (bias and
// activation deferred), then one thread per pooled output averages its p x p cells, adds the bias
// and activates. The chunk keeps plane + columns <= kMaxColumnBytes (1 GiB; at least one image).


ConvProblem plain_geometry(const PoolDims& d) { return conv_pool2d_conv_problem(d, d.PH * d.P, d.PW * d.P); }

struct UnfusedPlan {
  ConvProblem g;
  int64_t chunk;
  size_t plane_bytes, col_bytes;  // per chunk; the column matrices start at align256(plane_bytes)
};

UnfusedPlan unfused_plan(const PoolDims& d, Precision p) {
  UnfusedPlan u;
  u.g = plain_geometry(d);
  const size_t es = element_size(p);
  const size_t plane = static_cast<size_t>(d.CO * u.g.HO * u.g.WO) * es;
  const size_t col = im2col_is_identity(u.g) ? 0 : static_cast<size_t>(u.g.col_elements()) * es;
  u.chunk = images_per_chunk(d.N, plane + col);
  u.plane_bytes = static_cast<size_t>(u.chunk) * plane;
  u.col_bytes = static_cast<size_t>(u.chunk) * col;
  return u;
}

size_t unfused_workspace_bytes(const NodeDesc& node) {
  if (!valid_node(node)) return 0;
  const UnfusedPlan u = unfused_plan(pool_dims(node), node.precision);
  return u.col_bytes ? align256(u.plane_bytes) + u.col_bytes : u.plane_bytes;
}

// One thread per pooled output (n, co, py, px) of a chunk, grid-stride.
template <class T>
__global__ void avg_pool_bias_act_kernel(const T* __restrict__ conv, const T* __restrict__ bias,
                                         T* __restrict__ y, int64_t total, int64_t CO, int64_t PH,
                                         int64_t PW, int64_t P, float inv_area, DeviceActivation act) {
  const int64_t WCp = PW * P, HCp = PH * P;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t px = i % PW, py = (i / PW) % PH, plane = i / (PW * PH);  // plane = n*CO + co
    const T* cp = conv + plane * HCp * WCp + (py * P) * WCp + px * P;
    float s = 0.f;
    for (int64_t dy = 0; dy < P; ++dy)
      for (int64_t dx = 0; dx < P; ++dx) s += to_float(cp[dy * WCp + dx]);
    float v = s * inv_area;
    if (bias) v += to_float(bias[plane % CO]);
    y[i] = from_float<T>(activate(act, v));
  }
}

void run_unfused(const KernelCall& call) {
  const PoolCall c = pool_call(call);
  const PoolDims& d = c.d;
  const Precision p = call.node.precision;
  Context& ctx = context_of(call);
  const UnfusedPlan u = unfused_plan(d, p);
  if (d.N == 0 || d.CO == 0 || d.PH == 0 || d.PW == 0) return;
  if (!call.workspace) throw Error("cuda conv_pool2d.unfused: missing workspace");
  const size_t es = element_size(p);
  void* conv = call.workspace;
  void* col = u.col_bytes ? static_cast<char*>(call.workspace) + align256(u.plane_bytes) : nullptr;
  const int64_t plane = d.CO * u.g.HO * u.g.WO, x_image = d.CI * d.H * d.W, y_image = d.CO * d.PH * d.PW;
  const DeviceActivation act = device_activation(d.p->conv.activation);
  for (int64_t n0 = 0; n0 < d.N; n0 += u.chunk) {
    const int64_t n = std::min(u.chunk, d.N - n0);
    conv_gemm(ctx, p, u.g, c.w, d.CO, static_cast<const char*>(c.x) + n0 * x_image * es, x_image, conv,
              plane, n, col, n);
    const int64_t total = n * y_image;
    dispatch(p, [&](auto tag) {
      using T = decltype(tag);
      avg_pool_bias_act_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
          static_cast<const T*>(conv), static_cast<const T*>(c.bias),
          reinterpret_cast<T*>(static_cast<char*>(c.y) + n0 * y_image * es), total, d.CO, d.PH, d.PW,
          d.P, 1.f / float(d.P * d.P), act);
    });
    INFER_CUDA_CHECK_LAUNCH();
  }
}

// ---- fused_filter -------------------------------------------------------------------------------
// The pre-convolved filter of kernels/conv_shapes.h (conv_pool2d_fused_filter), uploaded once.

struct FusedFilter {
  int64_t kh = 0, kw = 0, co = 0, ci = 0;
  Precision precision = Precision::FP32;
  std::unique_ptr<DeviceArray> w;  // [CO][CI][kh][kw] in the precision's storage type
};

std::shared_ptr<void> prepare_fused_filter(const NodeDesc& node) {
  const PoolDims d = pool_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cuda conv_pool2d.fused_filter: the weight must be a constant");
  auto f = std::make_shared<FusedFilter>();
  const std::vector<float> host = conv_pool2d_fused_filter(d, w, f->kh, f->kw);
  f->co = d.CO;
  f->ci = d.CI;
  f->precision = node.precision;
  f->w = upload(host.data(), host.size(), node.precision);
  return f;
}


ConvProblem fused_geometry(const PoolDims& d) { return conv_pool2d_fused_problem(d); }

size_t fused_filter_workspace_bytes(const NodeDesc& node) {
  if (!valid_node(node)) return 0;
  const PoolDims d = pool_dims(node);
  return conv_gemm_workspace_bytes(fused_geometry(d), d.N, node.precision);
}

void run_fused_filter(const KernelCall& call) {
  const PoolCall c = pool_call(call);
  const PoolDims& d = c.d;
  const Precision p = call.node.precision;
  const auto* f = static_cast<const FusedFilter*>(call.prepared);
  const ConvProblem g = fused_geometry(d);
  if (!f || !f->w || f->kh != g.KH || f->kw != g.KW || f->co != d.CO || f->ci != d.CI ||
      f->precision != p)
    throw Error("cuda conv_pool2d.fused_filter: not prepared for this node");
  Context& ctx = context_of(call);
  if (d.N == 0 || d.CO == 0 || d.PH == 0 || d.PW == 0) return;
  if (!call.workspace && conv_gemm_workspace_bytes(g, d.N, p) > 0)
    throw Error("cuda conv_pool2d.fused_filter: missing workspace");
  const int64_t y_image = d.CO * d.PH * d.PW;
  conv_gemm(ctx, p, g, f->w->data(), d.CO, c.x, d.CI * d.H * d.W, c.y, y_image, d.N, call.workspace,
            conv_gemm_chunk(g, d.N, p));
  bias_activation(ctx, p, c.y, c.bias, d.N, d.CO, d.PH * d.PW, d.p->conv.activation);
}

// ---- direct_sum ---------------------------------------------------------------------------------
// B[a][b] = sum_{dy,dx < p} xpad[a + dy*s][b + dx*s] (dilated by the conv stride s), so that
// y[py][px] = bias + (1/p^2) * sum_{ci,ky,kx} w[ky][kx] * B[py*p*s + ky][px*p*s + kx]: the original
// kernel at stride p*s over B, scaled through the GEMM's alpha (no prepared weight copy). B is never
// stored: the column matrix of that strided conv is gathered straight from x, each element the float
// sum of its p x p cells (im2col with ConvProblem::box = p), so one launch and the box-sum buffer's
// write + read are saved; cells of xpad outside the image are 0, as the convolution sees them.


ConvProblem sum_geometry(const PoolDims& d) { return conv_pool2d_sum_problem(d); }

size_t direct_sum_workspace_bytes(const NodeDesc& node) {
  if (!valid_node(node)) return 0;
  const PoolDims d = pool_dims(node);
  return conv_gemm_workspace_bytes(sum_geometry(d), d.N, node.precision);
}

void run_direct_sum(const KernelCall& call) {
  const PoolCall c = pool_call(call);
  const PoolDims& d = c.d;
  const Precision p = call.node.precision;
  Context& ctx = context_of(call);
  const ConvProblem g = sum_geometry(d);
  if (d.N == 0 || d.CO == 0 || d.PH == 0 || d.PW == 0) return;
  if (!call.workspace && conv_gemm_workspace_bytes(g, d.N, p) > 0)
    throw Error("cuda conv_pool2d.direct_sum: missing workspace");
  conv_gemm(ctx, p, g, c.w, d.CO, c.x, d.CI * d.H * d.W, c.y, d.CO * d.PH * d.PW, d.N, call.workspace,
            conv_gemm_chunk(g, d.N, p), 1.f / float(d.P * d.P));
  bias_activation(ctx, p, c.y, c.bias, d.N, d.CO, d.PH * d.PW, d.p->conv.activation);
}

// fused_filter ahead of direct_sum on tensor cores (fp16 / tf32) for wide layers (C_in >= 256): one
// GEMM over the pre-convolved filter there costs less than direct_sum's box-sum gather + GEMM, whose
// fewer FLOPs matter little at tensor-core rates. H100, batch 1, 32x32, C = 512, fp16: fused_filter
// 0.017 ms, direct_sum 0.026 ms (2026-11-23, docs/benchmarks.md). Elsewhere direct_sum leads (20).
int fused_filter_priority(const NodeDesc& node) {
  if (!valid_with_constant_weight(node)) return 0;
  const bool tensor_cores = node.precision == Precision::FP16 || node.precision == Precision::TF32;
  return tensor_cores && node.input_shapes[0][1] >= 256 ? 25 : 10;
}

}  // namespace

INFER_REGISTER_KERNELS(conv_pool2d) {
  // Same order as the CPU backend: direct_sum (fewest FLOPs), fused_filter, unfused.
  registry.add("cuda", {
      {.op = "conv_pool2d", .name = "direct_sum", .priority = 20,
       .applicable = valid_with_constant_weight, .workspace_bytes = direct_sum_workspace_bytes,
       .run = run_direct_sum},
      {.op = "conv_pool2d", .name = "fused_filter", .priority = 10,
       .priority_for = fused_filter_priority, .applicable = valid_with_constant_weight,
       .workspace_bytes = fused_filter_workspace_bytes, .prepare = prepare_fused_filter,
       .run = run_fused_filter},
      {.op = "conv_pool2d", .name = "unfused", .priority = 5, .applicable = valid_node,
       .workspace_bytes = unfused_workspace_bytes, .run = run_unfused},
  });
}

}  // namespace infer::cuda
