// CUDA squeeze_excite "direct" (the fuse_squeeze_excite pass's node), NCHW and NHWC, float or half
// storage, float arithmetic. Three launches instead of the pool, two 1x1 convolutions and the multiply:
//  1. partial channel sums into the workspace, one per (n, chunk, c): NCHW a block (up to 256
//     threads) per 2048-element chunk of a plane (packs of V elements); NHWC blocks of 32 x 8
//     threads, x over packs of V channels, y over the pixels of a 256-pixel chunk (coalesced rows);
//  2. the hidden layer: a warp per (n, r) sums the chunks into the means and dots them with w1's row;
//  3. gate and multiply. NCHW: over the same chunks, each block first computing its plane's gate (a
//     dot of length C_r). NHWC: the gates once per (n, c) into the workspace (a thread each), then the
//     image's packs of V channels (16 bytes where C allows) as one flat, coalesced range per block,
//     each pack's gates read from L1, the final activation compiled in (dispatch_fixed_activation).
//     (The NHWC multiply had recomputed the gates of its 32 x V channels in every 64-pixel block and
//     switched on the activation per element: EfficientNet-B0 at batch 64 fp16 spent 0.68 ms in its
//     16 SE nodes on an H200.)
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

constexpr int kChunk = 256;        // pixels per partial sum (NHWC)
constexpr int kScalePacks = 8;     // packs per thread in the NHWC multiply (a block: 2048)
constexpr int kChunkNchw = 2048;   // elements of a plane per block (NCHW sum and multiply)
constexpr int kThreads = 256;      // NCHW blocks

struct SeShape {
  int64_t N, C, HW, R;
  int64_t chunks;  // partial sums per (n, c)
};

SeShape se_shape(const NodeDesc& node) {
  const Shape& x = node.input_shapes[0];
  const int64_t HW = x[2] * x[3];
  const int64_t chunk = node.layout == Layout::NHWC ? kChunk : kChunkNchw;
  const int64_t chunks = std::max<int64_t>(1, (HW + chunk - 1) / chunk);
  return {x[0], x[1], HW, node.input_shapes[1][0], chunks};
}

// Workspace: partial sums [N, chunks, C], hidden [N, R], then (16-byte aligned) the gates [N, C], float.
int64_t se_gates_offset(const SeShape& s) { return (s.N * (s.chunks * s.C + s.R) + 3) / 4 * 4; }
size_t se_workspace(const NodeDesc& node) {
  const SeShape s = se_shape(node);
  return static_cast<size_t>(se_gates_offset(s) + s.N * s.C) * sizeof(float);
}

// The kernels' 32-bit indices and grid limits.
bool se_applicable(const NodeDesc& node) {
  const SeShape s = se_shape(node);
  const int64_t limit = int64_t(1) << 30;
  return shape_numel(node.input_shapes[0]) < limit && s.N * s.C < INT32_MAX && s.N < 65536 &&
         s.chunks < 65536 && s.C <= 8192 && s.R <= 8192;
}

// NCHW: grid (N * C, chunks), block up to kThreads: block (plane, chunk) sums kChunkNchw elements of
// the plane in packs of V (V divides HW), one partial sum per (n, chunk, c).
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    se_sum_nchw(const T* __restrict__ x, float* __restrict__ part, int HW, int C) {
  using P = Pack<T, V>;
  const int64_t plane = blockIdx.x;
  const int chunk = static_cast<int>(blockIdx.y);
  const P* xp = reinterpret_cast<const P*>(x + plane * HW);
  const int end = min(HW, (chunk + 1) * kChunkNchw) / V;
  float acc = 0.f;
  const int step = static_cast<int>(blockDim.x);
  for (int i = chunk * kChunkNchw / V + static_cast<int>(threadIdx.x); i < end; i += step) {
    const P v = xp[i];
#pragma unroll
    for (int k = 0; k < V; ++k) acc += to_float(v.v[k]);
  }
  acc = warp_sum(acc);
  __shared__ float partial[kThreads / 32];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (threadIdx.x != 0) return;
  float total = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += partial[w];
  const int64_t n = plane / C, c = plane % C;
  part[(n * gridDim.y + chunk) * C + c] = total;
}

// grid (ceil(CV / 32), chunks, N), block (32, 8).
template <class T, int V>
__global__ void se_sum_nhwc(const T* __restrict__ x, float* __restrict__ part, int HW, int CV) {
  using P = Pack<T, V>;
  const int cv = static_cast<int>(blockIdx.x) * 32 + static_cast<int>(threadIdx.x);
  const int n = static_cast<int>(blockIdx.z), chunk = static_cast<int>(blockIdx.y);
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = 0.f;
  if (cv < CV) {
    const P* xp = reinterpret_cast<const P*>(x) + static_cast<int64_t>(n) * HW * CV + cv;
    const int end = min(HW, (chunk + 1) * kChunk);
    for (int pix = chunk * kChunk + static_cast<int>(threadIdx.y); pix < end; pix += 8) {
      const P v = xp[static_cast<int64_t>(pix) * CV];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += to_float(v.v[k]);
    }
  }
  __shared__ float rows[8][32 * V];
#pragma unroll
  for (int k = 0; k < V; ++k) rows[threadIdx.y][threadIdx.x * V + k] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || cv >= CV) return;
  const int C = CV * V;
  float* out = part + (static_cast<int64_t>(n) * gridDim.y + chunk) * C + cv * V;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float a = 0.f;
    for (int r = 0; r < 8; ++r) a += rows[r][threadIdx.x * V + k];
    out[k] = a;
  }
}

// grid (ceil(R / 8), N), block 256: warp w computes hidden unit r = blockIdx.x * 8 + w of sample n.
template <class T>
__global__ void se_hidden(const float* __restrict__ part, const T* __restrict__ w1, const T* __restrict__ b1,
                          float* __restrict__ hidden, int C, int R, int chunks, float inv_hw,
                          DeviceActivation act) {
  const int n = static_cast<int>(blockIdx.y);
  const int r = static_cast<int>(blockIdx.x) * 8 + static_cast<int>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (r >= R) return;
  const float* pn = part + static_cast<int64_t>(n) * chunks * C;
  const T* w = w1 + static_cast<int64_t>(r) * C;
  float acc = 0.f;
  for (int c = lane; c < C; c += 32) {
    float m = 0.f;
    for (int k = 0; k < chunks; ++k) m += pn[static_cast<int64_t>(k) * C + c];
    acc = fmaf(to_float(w[c]), m * inv_hw, acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) hidden[static_cast<int64_t>(n) * R + r] = activate(act, acc + to_float(b1[r]));
}

// NCHW: grid (N * C, chunks), block up to kThreads: warp 0 computes the plane's gate, then the block
// scales kChunkNchw elements of the plane in packs of V.
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    se_scale_nchw(const T* __restrict__ x, const T* __restrict__ w2, const T* __restrict__ b2,
                  const float* __restrict__ hidden, T* __restrict__ y, int C, int R, int HW,
                  DeviceActivation gate_act, DeviceActivation act) {
  using P = Pack<T, V>;
  const int64_t plane = blockIdx.x;
  const int n = static_cast<int>(plane / C), c = static_cast<int>(plane % C);
  __shared__ float gate;
  if (threadIdx.x < 32) {
    const float* h = hidden + static_cast<int64_t>(n) * R;
    const T* w = w2 + static_cast<int64_t>(c) * R;
    float acc = 0.f;
    for (int r = static_cast<int>(threadIdx.x); r < R; r += 32) acc = fmaf(to_float(w[r]), h[r], acc);
    acc = warp_sum(acc);
    if (threadIdx.x == 0) gate = activate(gate_act, acc + to_float(b2[c]));
  }
  __syncthreads();
  const float g = gate;
  const P* xp = reinterpret_cast<const P*>(x + plane * HW);
  P* yp = reinterpret_cast<P*>(y + plane * HW);
  const int end = min(HW, (static_cast<int>(blockIdx.y) + 1) * kChunkNchw) / V;
  for (int i = static_cast<int>(blockIdx.y) * kChunkNchw / V + static_cast<int>(threadIdx.x); i < end;
       i += static_cast<int>(blockDim.x)) {
    const P v = xp[i];
    P out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = from_float<T>(activate(act, to_float(v.v[k]) * g));
    yp[i] = out;
  }
}

// NHWC, step 3a: grid (ceil(C / 256), N), block 256: gates[n][c] = gate_act(w2[c] . hidden[n] + b2[c]).
template <class T>
__global__ void se_gates(const T* __restrict__ w2, const T* __restrict__ b2, const float* __restrict__ hidden,
                         float* __restrict__ gates, int C, int R, DeviceActivation gate_act) {
  const int n = static_cast<int>(blockIdx.y), c = static_cast<int>(blockIdx.x) * 256 + static_cast<int>(threadIdx.x);
  if (c >= C) return;
  const float* h = hidden + static_cast<int64_t>(n) * R;
  const T* w = w2 + static_cast<int64_t>(c) * R;
  float acc = 0.f;
  for (int r = 0; r < R; ++r) acc = fmaf(to_float(w[r]), h[r], acc);
  gates[static_cast<int64_t>(n) * C + c] = activate(gate_act, acc + to_float(b2[c]));
}

// NHWC, step 3b: grid (ceil(packs / (256 * kScalePacks)), N), block 256: the image's packs [HW * CV) of V
// channels as one flat range (consecutive threads, consecutive 16 / 8 / 4-byte packs), each scaled by
// its channels' gates (gates 16-byte aligned, so V % 4 == 0 reads them as float4) and activated (A:
// the activation's kind compiled in, or kGenericActivation).
template <class T, int V, int A>
__global__ void __launch_bounds__(256)
    se_scale_nhwc(const T* __restrict__ x, const float* __restrict__ gates, T* __restrict__ y, int CV, int packs,
                  DeviceActivation act) {
  using P = Pack<T, V>;
  const int n = static_cast<int>(blockIdx.y);
  const P* xp = reinterpret_cast<const P*>(x) + static_cast<int64_t>(n) * packs;
  P* yp = reinterpret_cast<P*>(y) + static_cast<int64_t>(n) * packs;
  const float* g = gates + static_cast<int64_t>(n) * CV * V;
  const int begin = static_cast<int>(blockIdx.x) * 256 * kScalePacks;
  const int end = min(packs, begin + 256 * kScalePacks);
  for (int i = begin + static_cast<int>(threadIdx.x); i < end; i += 256) {
    const int cv = i % CV;
    float gv[V];
    if constexpr (V % 4 == 0) {
#pragma unroll
      for (int k = 0; k < V; k += 4) {
        const float4 q = __ldg(reinterpret_cast<const float4*>(g + cv * V + k));
        gv[k] = q.x, gv[k + 1] = q.y, gv[k + 2] = q.z, gv[k + 3] = q.w;
      }
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) gv[k] = __ldg(g + cv * V + k);
    }
    const P v = xp[i];
    P out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float f = to_float(v.v[k]) * gv[k];
      if constexpr (A >= 0)
        out.v[k] = from_float<T>(activate_fixed<A>(act, f));
      else
        out.v[k] = from_float<T>(activate(act, f));
    }
    yp[i] = out;
  }
}

void se_run(const KernelCall& call) {
  if (!se_applicable(call.node)) throw Error("cuda squeeze_excite.direct: the tensors are too large");
  const auto& p = std::get<SqueezeExciteParams>(call.node.params);
  const SeShape s = se_shape(call.node);
  if (s.N * s.C == 0) return;
  Context& ctx = context_of(call);
  float* part = static_cast<float*>(call.workspace);
  float* hidden = part + s.N * s.chunks * s.C;
  float* gates = part + se_gates_offset(s);
  const int C = static_cast<int>(s.C), R = static_cast<int>(s.R), HW = static_cast<int>(s.HW);
  const float inv_hw = s.HW ? 1.f / float(s.HW) : 0.f;
  const DeviceActivation hidden_act = device_activation(p.hidden_activation),
                         gate_act = device_activation(p.gate_activation), act = device_activation(p.activation);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const auto t = [](const float* q) { return reinterpret_cast<const T*>(q); };
    const T *x = t(call.inputs[0]), *w1 = t(call.inputs[1]), *b1 = t(call.inputs[2]), *w2 = t(call.inputs[3]),
            *b2 = t(call.inputs[4]);
    T* y = reinterpret_cast<T*>(call.outputs[0]);
    const unsigned N = static_cast<unsigned>(s.N);
    const dim3 hidden_grid(static_cast<unsigned>((R + 7) / 8), N);
    if (call.node.layout == Layout::NHWC) {
      const auto launch = [&](auto v_tag) {
        constexpr int V = decltype(v_tag)::value;
        const int CV = C / V;
        const unsigned cblocks = static_cast<unsigned>((CV + 31) / 32);
        se_sum_nhwc<T, V><<<dim3(cblocks, static_cast<unsigned>(s.chunks), N), dim3(32, 8), 0, ctx.stream>>>(
            x, part, HW, CV);
        se_hidden<T><<<hidden_grid, 256, 0, ctx.stream>>>(part, w1, b1, hidden, C, R,
                                                          static_cast<int>(s.chunks), inv_hw, hidden_act);
        se_gates<T><<<dim3(static_cast<unsigned>((C + 255) / 256), N), 256, 0, ctx.stream>>>(w2, b2, hidden, gates, C,
                                                                                           R, gate_act);
      };
      const auto scale = [&](auto v_tag) {
        constexpr int V = decltype(v_tag)::value;
        const int CV = C / V, packs = HW * CV;
        const dim3 grid(static_cast<unsigned>(std::max(1, (packs + 256 * kScalePacks - 1) / (256 * kScalePacks))), N);
        dispatch_fixed_activation(act.kind, true, [&](auto a) {
          se_scale_nhwc<T, V, decltype(a)::value><<<grid, 256, 0, ctx.stream>>>(x, gates, y, CV, packs, act);
        });
      };
      const int v = pack_width(sizeof(T), C, {x, y});  // the sum's packs: up to 8 bytes
      switch (v) {
        case 4: launch(std::integral_constant<int, 4>{}); break;
        case 2: launch(std::integral_constant<int, 2>{}); break;
        default: launch(std::integral_constant<int, 1>{}); break;
      }
      // the multiply's: 16 bytes where C and the pointers allow
      constexpr int V16 = 16 / sizeof(T);
      if (C % V16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0)
        scale(std::integral_constant<int, V16>{});
      else if (v == 4)
        scale(std::integral_constant<int, 4>{});
      else if (v == 2)
        scale(std::integral_constant<int, 2>{});
      else
        scale(std::integral_constant<int, 1>{});
    } else {
      const auto launch = [&](auto v_tag) {
        constexpr int V = decltype(v_tag)::value;
        const dim3 grid(static_cast<unsigned>(s.N * s.C), static_cast<unsigned>(s.chunks));
        // whole warps, at most kThreads, no more than a chunk's packs (a 7x7 plane: 64 threads)
        const int packs = static_cast<int>(std::min<int64_t>(s.HW, kChunkNchw)) / V;
        const int threads = std::min(kThreads, std::max(32, (packs + 31) / 32 * 32));
        se_sum_nchw<T, V><<<grid, threads, 0, ctx.stream>>>(x, part, HW, C);
        se_hidden<T><<<hidden_grid, 256, 0, ctx.stream>>>(part, w1, b1, hidden, C, R,
                                                          static_cast<int>(s.chunks), inv_hw, hidden_act);
        se_scale_nchw<T, V><<<grid, threads, 0, ctx.stream>>>(x, w2, b2, hidden, y, C, R, HW, gate_act, act);
      };
      switch (pack_width(sizeof(T), HW, {x, y})) {
        case 4: launch(std::integral_constant<int, 4>{}); break;
        case 2: launch(std::integral_constant<int, 2>{}); break;
        default: launch(std::integral_constant<int, 1>{}); break;
      }
    }
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(squeeze_excite) {
  registry.add("cuda", {{.op = "squeeze_excite", .name = "direct", .priority = 10,
                         .layouts = {Layout::NCHW, Layout::NHWC}, .applicable = se_applicable,
                         .workspace_bytes = se_workspace, .run = se_run}});
}

}  // namespace infer::cuda
