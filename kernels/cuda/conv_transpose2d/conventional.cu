// CUDA conv_transpose2d `conventional`: Tida et al. Algorithm 1, the baseline kept for comparison
// (any stride, groups and dilation). NCHW, float or half storage with float sums. The zero-upsampled,
// padded input is built in the workspace (one thread per element of it, gather form), then a direct
// stride-1 convolution with the flipped kernel (prepared once as [C_out][C_in/groups][KH][KW]; taps
// d_h, d_w apart when dilated; output channel co reads its group's input planes) runs one thread per
// output element, consecutive threads along ox, with bias + activation (or per-channel PRelu). Its
// workspace is the paper's memory column.

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_transpose2d/common.h"

namespace infer::cuda {
namespace tconv {

// ================================================================================================
// conventional (Algorithm 1)
// ================================================================================================
// With the dilated kernel extents EKH = d_h*(KH-1)+1, EKW likewise: U[n][ci] has Hu = HO + EKH - 1 rows
// = (H-1)*s + 1 + (EKH-1-pad_top) + (EKH-1-pad_bottom) + output_padding (likewise Wu): x[iy][ix] sits
// at U[(EKH-1-pad_top) + iy*s_h][(EKW-1-pad_left) + ix*s_w], zeros elsewhere, so a valid stride-1
// convolution of U with the flipped (dilated) kernel yields HO x WO. Needs padding < EKH, EKW.

namespace {

int64_t ekh(const TconvDims& d) { return d.dh * (d.KH - 1) + 1; }
int64_t ekw(const TconvDims& d) { return d.dw * (d.KW - 1) + 1; }

bool pads_fit(const TconvDims& d) { return d.pt < ekh(d) && d.pb < ekh(d) && d.pl < ekw(d) && d.pr < ekw(d); }

uint64_t upsampled_elements(const TconvDims& d) {
  return static_cast<uint64_t>(d.N * d.CI) * static_cast<uint64_t>(d.HO + ekh(d) - 1) *
         static_cast<uint64_t>(d.WO + ekw(d) - 1);
}

}  // namespace

bool conventional_applicable(const NodeDesc& node) {
  if (!valid(node) || !has_constant_weight(node)) return false;
  return pads_fit(tconv_dims(node));
}

namespace {

// One thread per element of U (gather form, so every element is written once, no memset): the
// element holds x when its offset from the top-left corner is a multiple of the stride.
template <class T>
__global__ void upsample_kernel(const T* __restrict__ x, T* __restrict__ u, int64_t planes, int64_t H,
                                int64_t W, int64_t Hu, int64_t Wu, int64_t top, int64_t left, int sh,
                                int sw) {
  const int64_t total = planes * Hu * Wu;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ux = i % Wu, t = i / Wu, uy = t % Hu, plane = t / Hu;
    const int64_t dy = uy - top, dx = ux - left;
    T v = from_float<T>(0.f);
    if (dy >= 0 && dx >= 0 && dy % sh == 0 && dx % sw == 0) {
      const int64_t iy = dy / sh, ix = dx / sw;
      if (iy < H && ix < W) v = x[(plane * H + iy) * W + ix];
    }
    u[i] = v;
  }
}

// Direct valid convolution of U, one thread per output element (consecutive threads: consecutive ox,
// so U reads and y writes coalesce; the weight reads of a warp are mostly one broadcast address).
// Output channel co (group g = co / COG) sums over the group's CIG planes of U; tap (ky, kx) reads U
// at (oy + ky*dh, ox + kx*dw).
template <class T>
__global__ void direct_conv_kernel(const T* __restrict__ u, const T* __restrict__ wf,
                                   const T* __restrict__ bias, const T* __restrict__ slope,
                                   T* __restrict__ y, int64_t N, int64_t CI,
                                   int64_t CO, int64_t CIG, int64_t COG, int64_t Hu, int64_t Wu,
                                   int64_t KH, int64_t KW, int64_t dh, int64_t dw, int64_t HO, int64_t WO,
                                   DeviceActivation act) {
  const int64_t total = N * CO * HO * WO;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % WO, t = i / WO, oy = t % HO, t2 = t / HO, co = t2 % CO, n = t2 / CO;
    const int64_t c0 = (co / COG) * CIG;  // first input channel of co's group
    float acc = bias ? to_float(bias[co]) : 0.f;
    for (int64_t ci = 0; ci < CIG; ++ci) {
      const T* up = u + ((n * CI + c0 + ci) * Hu + oy) * Wu + ox;
      const T* wp = wf + (co * CIG + ci) * KH * KW;
      for (int64_t ky = 0; ky < KH; ++ky)
        for (int64_t kx = 0; kx < KW; ++kx)
          acc += to_float(up[ky * dh * Wu + kx * dw]) * to_float(wp[ky * KW + kx]);
    }
    y[i] = from_float<T>(activate_channel(act, acc, slope, co));
  }
}

}  // namespace

size_t conventional_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  return static_cast<size_t>(upsampled_elements(d)) * element_size(node.precision);
}

void run_conventional(const KernelCall& call) {
  const TconvCall c = tconv_call(call);
  const TconvDims& d = c.d;
  if (!pads_fit(d))
    throw Error("cuda conv_transpose2d.conventional: padding must be smaller than the dilated kernel");
  const FlippedWeights& f = flipped_of(call, d, "conventional");
  if (!call.workspace && upsampled_elements(d) > 0)
    throw Error("cuda conv_transpose2d.conventional: missing workspace");
  Context& ctx = context_of(call);
  const int64_t Hu = d.HO + ekh(d) - 1, Wu = d.WO + ekw(d) - 1;
  const int64_t n_up = static_cast<int64_t>(upsampled_elements(d)), n_out = d.N * d.CO * d.HO * d.WO;
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    T* u = static_cast<T*>(call.workspace);
    if (n_up > 0) {
      upsample_kernel<T><<<grid_for(n_up), 256, 0, ctx.stream>>>(
          static_cast<const T*>(c.x), u, d.N * d.CI, d.H, d.W, Hu, Wu, ekh(d) - 1 - d.pt,
          ekw(d) - 1 - d.pl, d.sh, d.sw);
      INFER_CUDA_CHECK_LAUNCH();
    }
    if (n_out > 0) {
      direct_conv_kernel<T><<<grid_for(n_out), 256, 0, ctx.stream>>>(
          u, f.w->as<T>(), static_cast<const T*>(c.bias), static_cast<const T*>(c.slope), static_cast<T*>(c.y),
          d.N, d.CI, d.CO, d.CIG,
          d.COG, Hu, Wu, d.KH, d.KW, d.dh, d.dw, d.HO, d.WO, device_activation(d.act));
      INFER_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace tconv

}  // namespace infer::cuda
