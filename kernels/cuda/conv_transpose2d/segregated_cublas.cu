// CUDA conv_transpose2d `segregated_cublas`, stride 2: the four kernel-segregation phases (Tida et
// al.) as explicit per-phase column matrices of the un-upsampled input, ONE strided-batched cuBLAS GEMM
// over the phases, and one epilogue that interleaves the phase results into NCHW with bias +
// activation or per-channel PRelu (one thread per output element). Workspace: columns + phase outputs per chunk of images
// (<= 256 MiB). Also its per-node priority. Layout and thread maps below.
#include <algorithm>
#include <climits>
#include <vector>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_transpose2d/common.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/im2col.cuh"

namespace infer::cuda::tconv {

// --- segregated_cublas ------------------------------------------------------------------------
// segregated_cublas: stride-2 transposed convolution as the four kernel-segregation phases (Tida et
// al.), each an explicit im2col of the un-upsampled input + ONE cuBLAS strided-batched GEMM over the
// four phases + one epilogue that interleaves the phase results into NCHW with bias + activation.
// The CPU segregated_gemm's design (explicit per-phase columns, rearranging epilogue pass) on cuBLAS.
// It reuses the phase math of kernels/conv_shapes.h (phase_axis, phase_taps) and the call checks of
// common.h (tconv_call).
//
// Layout (per chunk of `imgs` images; Hp x Wp = ceil(HO/2) x ceil(WO/2), the largest phase grid):
//   A_ph [C_out][K]   K = C_in * th * tw, th = ceil(KH/2), tw = ceil(KW/2) (the most taps of any
//                     phase), k = (ci*th + ty)*tw + tx; flipped sub-kernel, zeros where the phase has
//                     fewer taps (odd kernels) -- prepared once, storage type.
//   B_ph [K][cols]    cols = imgs*Hp*Wp, col = (img*Hp + m)*Wp + mm; zero for padding taps, taps
//                     outside the input and (m, mm) outside this phase's own grid (odd outputs).
//   C_ph [C_out][cols] = A_ph B_ph: one cuda::gemm, batch 4 (fp16: tensor cores, fp32 accumulation;
//                     tf32: TF32; fp32: strict).
//   y[n][co][oy][ox] = act(C_ph[co][(n*Hp + oy/2)*Wp + ox/2] + bias[co]), ph = ((oy+pt)%2, (ox+pl)%2).
namespace {

constexpr size_t kScBudget = size_t(256) << 20;  // columns + phase outputs of one chunk (>= 1 image)
constexpr int kScRows = 8;                       // column rows (k) per thread in the im2col kernel

struct ScPhase {
  int nj, ni;                    // taps of this phase along H and W (<= th, tw; 0: no taps)
  int64_t count_h, count_w;      // this phase's output grid (<= Hp, Wp; may be 0)
  int64_t q0h, q0w;              // input row/column of the phase's first output, tap j = 0
};

struct ScGeom {
  ScPhase ph[4];                 // ph = rh*2 + rw, rh = (oy + pad_top) % 2
  int64_t CI, H, W, CO, HO, WO;
  int64_t th, tw, K;             // K = CI*th*tw: the batched GEMM's K (same for all four phases)
  int64_t Hp, Wp, HpWp;          // the largest phase grid: the batched layout
};

ScGeom sc_geom(const TconvDims& d) {
  ScGeom g{};
  g.CI = d.CI;
  g.H = d.H;
  g.W = d.W;
  g.CO = d.CO;
  g.HO = d.HO;
  g.WO = d.WO;
  g.th = g.tw = 0;
  for (int rh = 0; rh < 2; ++rh)
    for (int rw = 0; rw < 2; ++rw) {
      ScPhase& s = g.ph[rh * 2 + rw];
      const PhaseAxis ah = phase_axis(rh, 2, d.pt, d.HO), aw = phase_axis(rw, 2, d.pl, d.WO);
      s.nj = static_cast<int>(phase_taps(rh, 2, d.KH));
      s.ni = static_cast<int>(phase_taps(rw, 2, d.KW));
      s.count_h = ah.count;
      s.count_w = aw.count;
      s.q0h = ah.q0;
      s.q0w = aw.q0;
      g.th = std::max<int64_t>(g.th, s.nj);
      g.tw = std::max<int64_t>(g.tw, s.ni);
    }
  g.K = d.CI * g.th * g.tw;
  g.Hp = (d.HO + 1) / 2;  // = the count of the phase whose first row is 0
  g.Wp = (d.WO + 1) / 2;
  g.HpWp = g.Hp * g.Wp;
  return g;
}

// Images per chunk: columns (4*K*HpWp) + phase outputs (4*CO*HpWp) per image within kScBudget, at
// least one image, and few enough that the GEMM's n = imgs*HpWp stays within int.
int64_t sc_chunk(const ScGeom& g, int64_t N, Precision p) {
  if (N <= 0 || g.HpWp == 0) return 0;
  const size_t per_image = static_cast<size_t>(4 * (g.K + g.CO) * g.HpWp) * element_size(p);
  return std::min<int64_t>(images_per_chunk(N, per_image, kScBudget), std::max<int64_t>(1, INT_MAX / g.HpWp));
}

size_t sc_col_bytes(const ScGeom& g, int64_t chunk, Precision p) {
  return align256(static_cast<size_t>(4 * g.K * chunk * g.HpWp) * element_size(p));
}
size_t sc_out_bytes(const ScGeom& g, int64_t chunk, Precision p) {
  return align256(static_cast<size_t>(4 * g.CO * chunk * g.HpWp) * element_size(p));
}

}  // namespace

bool segregated_cublas_applicable(const NodeDesc& node) {
  if (!plain(node) || !has_constant_weight(node) || strides(node) != std::make_pair(2, 2)) return false;
  const TconvDims d = tconv_dims(node);
  const ScGeom g = sc_geom(d);
  // cuBLAS takes int m, n, k and leading dimensions; the epilogue indexes one plane in int.
  return g.K <= INT_MAX && d.CO <= INT_MAX && g.HpWp <= INT_MAX && d.HO * d.WO <= INT_MAX &&
         4 * d.CO * g.K <= (int64_t(1) << 40);
}

size_t segregated_cublas_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  const ScGeom g = sc_geom(d);
  if (d.N == 0 || d.CO == 0 || g.HpWp == 0) return 0;
  const int64_t chunk = sc_chunk(g, d.N, node.precision);
  return sc_col_bytes(g, chunk, node.precision) + sc_out_bytes(g, chunk, node.precision);
}

namespace {

struct ScPrepared {
  PreparedFor made_for;
  int64_t K;
  std::unique_ptr<DeviceArray> a;  // [4][C_out][K], storage type
};

}  // namespace

std::shared_ptr<void> prepare_segregated_cublas(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  require_segregated(d, "segregated_cublas");
  const float* w = host_weight(node, "segregated_cublas");
  const ScGeom g = sc_geom(d);
  std::vector<float> a(static_cast<size_t>(4 * d.CO * g.K), 0.f);
  for (int ph = 0; ph < 4; ++ph) {
    const ScPhase& s = g.ph[ph];
    const int rh = ph / 2, rw = ph % 2;
    for (int64_t co = 0; co < d.CO; ++co) {
      float* row = a.data() + (ph * d.CO + co) * g.K;
      for (int64_t ci = 0; ci < d.CI; ++ci)
        for (int ty = 0; ty < s.nj; ++ty)
          for (int tx = 0; tx < s.ni; ++tx) {
            // flipped sub-kernel: tap ty of phase rh is the original tap ky = rh + 2*(nj-1-ty)
            const int64_t ky = rh + 2 * (s.nj - 1 - ty), kx = rw + 2 * (s.ni - 1 - tx);
            row[(ci * g.th + ty) * g.tw + tx] = w[((ci * d.CO + co) * d.KH + ky) * d.KW + kx];
          }
    }
  }
  auto out = std::make_shared<ScPrepared>();
  out->made_for = prepared_for(d, node.precision);
  out->K = g.K;
  out->a = upload(a.data(), a.size(), node.precision);
  return out;
}

namespace {

// Per-phase column matrices of images [0, imgs) of x. Grid: x = column blocks of 256 (one thread per
// column, fixed for the thread: its image/row/column is decoded once), y = groups of kScRows rows
// (grid-stride), z = phase. For one row k, consecutive threads read consecutive input columns and
// write consecutive column elements: coalesced both ways. Every element is written (zeros included).
template <class T>
__global__ void sc_columns_kernel(const T* __restrict__ x, T* __restrict__ cols, ScGeom g, int ncols) {
  const int64_t col64 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col64 >= ncols) return;
  const int col = static_cast<int>(col64);
  const int ph = blockIdx.z;
  const ScPhase P = g.ph[ph];
  const int hpwp = static_cast<int>(g.HpWp), wp = static_cast<int>(g.Wp);
  const int img = col / hpwp, r = col - img * hpwp, m = r / wp, mm = r - m * wp;
  const bool col_ok = m < P.count_h && mm < P.count_w;
  const T* xn = x + int64_t(img) * g.CI * g.H * g.W;
  const int64_t iy0 = P.q0h + m - (P.nj - 1), ix0 = P.q0w + mm - (P.ni - 1);
  T* out = cols + int64_t(ph) * g.K * ncols + col;
  const int th = static_cast<int>(g.th), tw = static_cast<int>(g.tw);
  const int64_t kgroups = (g.K + kScRows - 1) / kScRows;
  for (int64_t kg = blockIdx.y; kg < kgroups; kg += gridDim.y) {
    const int64_t k0 = kg * kScRows;
    int64_t ci = k0 / (th * tw);
    int rest = static_cast<int>(k0 - ci * th * tw), ty = rest / tw, tx = rest - ty * tw;
#pragma unroll
    for (int i = 0; i < kScRows; ++i) {
      const int64_t k = k0 + i;
      if (k >= g.K) break;
      T v = from_float<T>(0.f);
      if (col_ok && ty < P.nj && tx < P.ni) {
        const int64_t iy = iy0 + ty, ix = ix0 + tx;
        if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W) v = xn[(ci * g.H + iy) * g.W + ix];
      }
      out[k * ncols] = v;
      if (++tx == tw) {
        tx = 0;
        if (++ty == th) {
          ty = 0;
          ++ci;
        }
      }
    }
  }
}

// Interleaves the four phase results into y (images [0, imgs) of the chunk) with bias + activation.
// Grid: x = blocks of 256 consecutive output elements of one (image, channel) plane (one thread per
// output, coalesced stores), y = planes (grid-stride). The phase of (oy, ox) is ((oy+pt)%2,
// (ox+pl)%2) and its grid position (oy/2, ox/2): "P -> floor(P/2), odd P swaps the phase order".
template <class T>
__global__ void sc_epilogue_kernel(const T* __restrict__ c, const T* __restrict__ bias,
                                   const T* __restrict__ slope, T* __restrict__ y,
                                   ScGeom g, int64_t planes, int ncols, int pt, int pl,
                                   DeviceActivation act) {
  const int howo = static_cast<int>(g.HO * g.WO), wo = static_cast<int>(g.WO);
  const int64_t e64 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e64 >= howo) return;
  const int e = static_cast<int>(e64);
  const int oy = e / wo, ox = e - oy * wo;
  const int ph = ((oy + pt) & 1) * 2 + ((ox + pl) & 1);
  const int64_t cell = int64_t(oy >> 1) * g.Wp + (ox >> 1);
  for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
    const int64_t img = p / g.CO, co = p - img * g.CO;
    float v = to_float(c[(ph * g.CO + co) * ncols + img * g.HpWp + cell]);
    if (bias) v += to_float(bias[co]);
    y[p * howo + e] = from_float<T>(activate_channel(act, v, slope, co));
  }
}

}  // namespace

void run_segregated_cublas(const KernelCall& call) {
  const TconvCall c = segregated_call(call, "segregated_cublas");
  const TconvDims& d = c.d;
  const Precision p = call.node.precision;
  const ScGeom g = sc_geom(d);
  const auto* prep = static_cast<const ScPrepared*>(call.prepared);
  if (!prep || !(prep->made_for == prepared_for(d, p)) || prep->K != g.K)
    throw Error("cuda conv_transpose2d.segregated_cublas: not prepared for this node");
  if (g.K > INT_MAX || g.HpWp > INT_MAX || d.HO * d.WO > INT_MAX)
    throw Error("cuda conv_transpose2d.segregated_cublas: node too large");
  const size_t ws = segregated_cublas_workspace_bytes(call.node);
  if (!call.workspace && ws > 0) throw Error("cuda conv_transpose2d.segregated_cublas: missing workspace");
  Context& ctx = context_of(call);
  if (ws == 0) return;  // empty output (N, C_out or the output plane is 0)
  const size_t es = element_size(p);
  const int64_t chunk = sc_chunk(g, d.N, p);
  char* col = static_cast<char*>(call.workspace);
  char* out = col + sc_col_bytes(g, chunk, p);
  const int64_t x_image = d.CI * d.H * d.W, y_image = d.CO * d.HO * d.WO;
  for (int64_t n0 = 0; n0 < d.N; n0 += chunk) {
    const int64_t imgs = std::min(chunk, d.N - n0);
    const int ncols = static_cast<int>(imgs * g.HpWp);
    const char* xc = static_cast<const char*>(c.x) + static_cast<size_t>(n0 * x_image) * es;
    char* yc = static_cast<char*>(c.y) + static_cast<size_t>(n0 * y_image) * es;
    if (g.K > 0) {
      // (1) the columns of all four phases
      const int64_t kgroups = (g.K + kScRows - 1) / kScRows;
      const dim3 grid(static_cast<unsigned>((int64_t(ncols) + 255) / 256),
                      static_cast<unsigned>(std::min<int64_t>(kgroups, 65535)), 4u);
      dispatch(p, [&](auto tag) {
        using T = decltype(tag);
        sc_columns_kernel<T><<<grid, 256, 0, ctx.stream>>>(reinterpret_cast<const T*>(xc),
                                                           reinterpret_cast<T*>(col), g, ncols);
      });
      INFER_CUDA_CHECK_LAUNCH();
      // (2) C_ph = A_ph B_ph for the four phases in one strided-batched GEMM
      GemmArgs a;
      a.m = d.CO;
      a.n = ncols;
      a.k = g.K;
      a.a = prep->a->data();
      a.lda = g.K;
      a.stride_a = d.CO * g.K;
      a.b = col;
      a.ldb = ncols;
      a.stride_b = g.K * ncols;
      a.c = out;
      a.ldc = ncols;
      a.stride_c = d.CO * ncols;
      a.batch = 4;
      gemm(ctx, p, a);
    } else {  // C_in == 0: every phase result is 0 (the output is act(bias))
      INFER_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(4 * d.CO * ncols) * es, ctx.stream));
    }
    // (3) interleave into NCHW with bias + activation
    const int64_t planes = imgs * d.CO;
    const dim3 grid(static_cast<unsigned>((d.HO * d.WO + 255) / 256),
                    static_cast<unsigned>(std::min<int64_t>(planes, 65535)));
    dispatch(p, [&](auto tag) {
      using T = decltype(tag);
      sc_epilogue_kernel<T><<<grid, 256, 0, ctx.stream>>>(
          reinterpret_cast<const T*>(out), static_cast<const T*>(c.bias), static_cast<const T*>(c.slope),
          reinterpret_cast<T*>(yc), g,
          planes, ncols, d.pt, d.pl, device_activation(d.act));
    });
    INFER_CUDA_CHECK_LAUNCH();
  }
}

// segregated_cublas's per-node priority. Batched small-spatial layers: at batch 32 on the H100
// (2026-11-23, bench/results/gpu-2026-11-23.md, Table 4) it was the fastest variant on every 4x4
// input (fp32: EB-GAN 4x4x2048 0.78 ms vs 1.75 for gemm_col2im, DCGAN 0.27 vs 0.45; fp16: 0.12 vs
// 0.45, 0.056 vs 0.113) and on 8x8 inputs with >= 1024 channels (EB-GAN 0.79 vs 0.85 fp32, 0.17 vs
// 0.21 fp16), where one batched GEMM over the four phases has enough columns to fill the GPU and
// the col2im columns (16x the input) cost more than the phase columns (4x). At batch 1 it lost
// everywhere (4x4x2048 0.28 vs 0.10 ms), so the rule starts at batch 16 (batches 2-31 were not
// measured). 27: above gemm_col2im's 25. Otherwise 15, below segregated_gemm (20).
int segregated_cublas_priority(const NodeDesc& node) {
  if (!valid(node)) return 15;
  const TconvDims d = tconv_dims(node);
  const bool batched = d.N >= 16;
  if (batched && (d.H * d.W <= 16 || (d.H * d.W <= 64 && d.CI >= 1024))) return 27;
  return 15;
}

}  // namespace infer::cuda::tconv
