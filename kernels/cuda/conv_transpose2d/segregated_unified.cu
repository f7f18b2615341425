// CUDA conv_transpose2d `segregated_unified`: Tida et al. Algorithm 2 (unified kernel segregation),
// stride 2 only. NCHW, float or half storage with float sums. One thread per output element (grid-stride,
// consecutive threads along ox, so stores coalesce); its (row % 2, col % 2) phase selects the
// sub-kernel taps of the original weight by index math. No workspace, no prepare: the paper's kernel
// and the cross-check for segregated_gemm, not the fast path.
#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_transpose2d/common.h"
#include "kernels/cuda/gemm_epilogue.cuh"

namespace infer::cuda::tconv {
namespace {

// ================================================================================================
// segregated_unified (Algorithm 2), stride 2
// ================================================================================================
// One thread per output element (n, co, oy, ox), consecutive threads along ox. Its phase
// (rh, rw) = ((oy + pad_top) % 2, (ox + pad_left) % 2) selects the taps ky = rh + 2j, kx = rw + 2i of
// the ORIGINAL weight, which read input (q_h - j, q_w - i) with q = (o + pad) / 2: the paper's
// "P -> floor(P/2), odd P swaps the phase order" falls out of this index math. Only taps that land
// inside the input are visited, so odd output sizes and output_padding need no special case. No
// workspace, no prepare: the weight is read as stored on the device.

template <class T>
__global__ void unified_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t N,
                               int64_t CI, int64_t H, int64_t W, int64_t CO, int64_t KH, int64_t KW, int64_t HO,
                               int64_t WO, int64_t pt, int64_t pl, GemmEpilogue<T> ep) {
  const int64_t total = N * CO * HO * WO;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % WO, t = i / WO, oy = t % HO, t2 = t / HO, co = t2 % CO, n = t2 / CO;
    const int64_t rh = (oy + pt) & 1, qh = (oy + pt) >> 1;
    const int64_t rw = (ox + pl) & 1, qw = (ox + pl) >> 1;
    // Tap j is used when ky = rh + 2j < KH and 0 <= qh - j < H.
    const int64_t j_lo = qh - (H - 1) > 0 ? qh - (H - 1) : 0;
    const int64_t j_hi = rh < KH ? min(qh, (KH - 1 - rh) >> 1) : -1;
    const int64_t i_lo = qw - (W - 1) > 0 ? qw - (W - 1) : 0;
    const int64_t i_hi = rw < KW ? min(qw, (KW - 1 - rw) >> 1) : -1;
    const auto ch = ep.channel(co);
    float acc = ch.bias;  // the bias first, then the products in (ci, j, i) order
    for (int64_t ci = 0; ci < CI; ++ci) {
      const T* xc = x + (n * CI + ci) * H * W;
      const T* wc = w + (ci * CO + co) * KH * KW;
      for (int64_t j = j_lo; j <= j_hi; ++j)
        for (int64_t ii = i_lo; ii <= i_hi; ++ii)
          acc += to_float(xc[(qh - j) * W + (qw - ii)]) * to_float(wc[(rh + 2 * j) * KW + rw + 2 * ii]);
    }
    y[i] = from_float<T>(ep.finish(acc, ch, i));
  }
}

}  // namespace

void run_unified(const KernelCall& call) {
  const TconvCall c = segregated_call(call, "segregated_unified");
  const TconvDims& d = c.d;
  Context& ctx = context_of(call);
  const int64_t total = d.N * d.CO * d.HO * d.WO;
  if (total == 0) return;
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    unified_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        static_cast<const T*>(c.x), static_cast<const T*>(c.w), static_cast<T*>(c.y), d.N, d.CI, d.H, d.W, d.CO,
        d.KH, d.KW, d.HO, d.WO, d.pt, d.pl, gemm_epilogue<T>(c.bias, d.act, nullptr, c.slope));
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace infer::cuda::tconv
