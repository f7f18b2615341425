// CUDA conv2d `direct_small_cout_nhwc`: a channels-last convolution with few output channels
// (C_out <= 8: a generator's image output, e.g. EB-GAN's 64 -> 3 at 256x256), where a GEMM with
// N = C_out starves the tensor cores and width folding multiplies the work by its fold factor.
// One thread per output pixel computes all C_out channels: it walks the KH x KW window, reading each
// input pixel's C_in channels as 16-byte vectors (NHWC keeps them contiguous; neighbouring threads'
// windows overlap in L1/L2), against weights staged once per block in shared memory as float
// [KH][KW][C_in][C_out] (warp-uniform reads: broadcasts). Float sums; bias and activation fused.
// Grid-stride over pixels with a grid of a few blocks per SM, so the weights load once per block.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/cuda_kernels.h"

namespace infer::cuda {
namespace {

constexpr int kMaxCout = 8;
constexpr size_t kSmemBytes = 48 * 1024;

struct Geo {
  int N, C, H, W, HO, WO, KH, KW, sh, sw, pt, pl;
};

template <class T, int CO, int V>
__global__ void __launch_bounds__(256)
    small_cout_nhwc_kernel(const T* __restrict__ x, const float* __restrict__ wf,
                           const float* __restrict__ bias, T* __restrict__ y, Geo g, DeviceActivation act) {
  extern __shared__ float ws[];
  const int weights = g.KH * g.KW * g.C * CO;
  for (int i = threadIdx.x; i < weights; i += blockDim.x) ws[i] = wf[i];
  __syncthreads();
  const int64_t total = int64_t(g.N) * g.HO * g.WO;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < total;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int ox = static_cast<int>(p % g.WO);
    const int oy = static_cast<int>((p / g.WO) % g.HO);
    const int n = static_cast<int>(p / (int64_t(g.WO) * g.HO));
    float acc[CO];
#pragma unroll
    for (int co = 0; co < CO; ++co) acc[co] = 0.f;
    for (int ky = 0; ky < g.KH; ++ky) {
      const int iy = oy * g.sh - g.pt + ky;
      if (iy < 0 || iy >= g.H) continue;
      for (int kx = 0; kx < g.KW; ++kx) {
        const int ix = ox * g.sw - g.pl + kx;
        if (ix < 0 || ix >= g.W) continue;
        const T* xp = x + ((int64_t(n) * g.H + iy) * g.W + ix) * g.C;
        const float* wk = ws + (ky * g.KW + kx) * g.C * CO;
        for (int c = 0; c < g.C; c += V) {
          Pack<T, V> v = *reinterpret_cast<const Pack<T, V>*>(xp + c);
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const float xv = to_float(v.v[k]);
#pragma unroll
            for (int co = 0; co < CO; ++co) acc[co] += xv * wk[(c + k) * CO + co];
          }
        }
      }
    }
#pragma unroll
    for (int co = 0; co < CO; ++co)
      y[p * CO + co] = from_float<T>(activate(act, acc[co] + (bias ? bias[co] : 0.f)));
  }
}

struct Checked {
  bool ok = false;
  Geo g{};
  int CO = 0;
};

Checked check(const NodeDesc& node) {
  Checked r;
  const auto* p = std::get_if<Conv2DParams>(&node.params);
  if (!p || node.layout != Layout::NHWC || node.input_shapes.size() < 2 || node.input_shapes.size() > 3 ||
      node.output_shapes.size() != 1 || node.constants.size() < 2 || !node.constants[1])
    return r;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return r;
  for (const Shape* s : {&x, &w, &y})
    for (int64_t d : *s)
      if (d <= 0 || d >= (int64_t(1) << 30)) return r;
  if (w[1] != x[1] || y[1] != w[0] || y[0] != x[0] || w[0] > kMaxCout) return r;
  if (node.input_shapes.size() == 3 && (shape_numel(node.input_shapes[2]) != w[0] ||
                                         node.constants.size() < 3 || !node.constants[2]))
    return r;
  if (p->groups != 1 || p->dilation_h != 1 || p->dilation_w != 1 || p->stride_h <= 0 ||
      p->stride_w <= 0)
    return r;
  if (static_cast<size_t>(w[1] * w[2] * w[3] * w[0]) * sizeof(float) > kSmemBytes) return r;
  if ((x[2] + p->pad.top + p->pad.bottom - w[2]) / p->stride_h + 1 != y[2] ||
      (x[3] + p->pad.left + p->pad.right - w[3]) / p->stride_w + 1 != y[3])
    return r;
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  r.g = Geo{i32(x[0]), i32(x[1]), i32(x[2]), i32(x[3]), i32(y[2]), i32(y[3]), i32(w[2]), i32(w[3]),
            p->stride_h, p->stride_w, p->pad.top, p->pad.left};
  r.CO = i32(w[0]);
  r.ok = true;
  return r;
}

bool applicable(const NodeDesc& node) { return conv2d_plain(node) && check(node).ok; }

// Measured on the H100 (2026-11-24, EB-GAN's last layer, 64x64x256x256 -> 3 channels, batch 64
// fp16): 2.42 ms against 0.83 ms width-folded on cuDNN, so it is below cudnn_folded (60) and the
// NCHW direct_small_cout (30): a fallback for shapes nothing else in NHWC takes, and an --autotune
// candidate. (Likely limits: one pixel per thread re-reads its window's channels with no reuse in
// registers, and the float FMAs per pixel, 576 x C_out here, run without tensor cores.)
int priority(const NodeDesc& node) { return check(node).ok ? 3 : 0; }

struct State {
  std::unique_ptr<DeviceArray> weights;  // float [KH][KW][C_in][C_out]
  std::unique_ptr<DeviceArray> bias;     // float [C_out], or null
};

std::shared_ptr<void> prepare(const NodeDesc& node) {
  const Checked c = check(node);
  if (!c.ok) throw Error("cuda conv2d.direct_small_cout_nhwc: needs NHWC, C_out <= 8 and constant weights");
  const Geo& g = c.g;
  const float* w = node.constants[1];
  std::vector<float> t(static_cast<size_t>(g.KH * g.KW * g.C * c.CO));
  for (int co = 0; co < c.CO; ++co)
    for (int ci = 0; ci < g.C; ++ci)
      for (int ky = 0; ky < g.KH; ++ky)
        for (int kx = 0; kx < g.KW; ++kx)
          t[static_cast<size_t>(((ky * g.KW + kx) * g.C + ci) * c.CO + co)] =
              w[((int64_t(co) * g.C + ci) * g.KH + ky) * g.KW + kx];
  auto st = std::make_shared<State>();
  st->weights = upload(t.data(), t.size(), Precision::FP32);
  if (node.input_shapes.size() == 3) st->bias = upload(node.constants[2], static_cast<size_t>(c.CO), Precision::FP32);
  return st;
}

template <class T, int CO>
void launch(const Checked& c, const T* x, const State& st, T* y, DeviceActivation act, Context& ctx) {
  const int64_t pixels = int64_t(c.g.N) * c.g.HO * c.g.WO;
  const unsigned blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((pixels + 255) / 256, int64_t(ctx.sm_count > 0 ? ctx.sm_count : 132) * 8)));
  const size_t smem = static_cast<size_t>(c.g.KH * c.g.KW * c.g.C * CO) * sizeof(float);
  const float* wf = st.weights->as<float>();
  const float* b = st.bias ? st.bias->as<float>() : nullptr;
  constexpr int kVec = 16 / sizeof(T);
  if (c.g.C % kVec == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0)
    small_cout_nhwc_kernel<T, CO, kVec><<<blocks, 256, smem, ctx.stream>>>(x, wf, b, y, c.g, act);
  else
    small_cout_nhwc_kernel<T, CO, 1><<<blocks, 256, smem, ctx.stream>>>(x, wf, b, y, c.g, act);
}

void run(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  if (!call.prepared) throw Error("cuda conv2d.direct_small_cout_nhwc: not prepared");
  const Checked c = check(call.node);
  if (!c.ok) throw Error("cuda conv2d.direct_small_cout_nhwc: needs NHWC, C_out <= 8 and constant weights");
  const State& st = *static_cast<const State*>(call.prepared);
  Context& ctx = context_of(call);
  const DeviceActivation act = device_activation(p.activation);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const T* x = reinterpret_cast<const T*>(call.inputs[0]);
    T* y = reinterpret_cast<T*>(call.outputs[0]);
    switch (c.CO) {
      case 1: launch<T, 1>(c, x, st, y, act, ctx); break;
      case 2: launch<T, 2>(c, x, st, y, act, ctx); break;
      case 3: launch<T, 3>(c, x, st, y, act, ctx); break;
      case 4: launch<T, 4>(c, x, st, y, act, ctx); break;
      case 5: launch<T, 5>(c, x, st, y, act, ctx); break;
      case 6: launch<T, 6>(c, x, st, y, act, ctx); break;
      case 7: launch<T, 7>(c, x, st, y, act, ctx); break;
      default: launch<T, 8>(c, x, st, y, act, ctx); break;
    }
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

void register_conv2d_small_cout_nhwc(KernelRegistry& registry) {
  registry.add("cuda", {
      {.op = "conv2d", .name = "direct_small_cout_nhwc", .priority = 3, .priority_for = priority,
       .layouts = {Layout::NHWC}, .applicable = applicable, .prepare = prepare, .run = run},
  });
}

}  // namespace infer::cuda
