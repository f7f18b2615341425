// What the CUDA conv_transpose2d variants of this folder share (host code, for .cc and .cu files):
// the node's validated sizes, the run-time unpacking of a call (dims + non-null device pointers), the
// flipped weights that conventional and flipped_conv prepare, and every variant family's entry points
// (applicable / workspace / prepare / run / priority), which register.cc puts in the registry.
// Everything lives in namespace infer::cuda::tconv; the definitions are in common.cc and the family files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/context.h"

namespace infer::cuda::tconv {

// ---- the node, validated -----------------------------------------------------------------------

// The node's validated sizes (kernels/conv_shapes.h), shared with the cpu kernels.
using TconvDims = ConvTranspose2DDims;
inline TconvDims tconv_dims(const NodeDesc& node) { return conv_transpose2d_dims(node, "cuda"); }

// Run-time unpacking: dims plus non-null device pointers for every input the node declares.
using TconvCall = ConvLikeCall<TconvDims, void>;
inline TconvCall tconv_call(const KernelCall& call) { return conv_like_call<void>(call, tconv_dims(call.node)); }

inline bool valid(const NodeDesc& node) { return conv_transpose2d_valid(node); }
// Valid with groups 1 and dilation 1: what every variant but gemm_col2im and conventional needs.
inline bool plain(const NodeDesc& node) { return conv_transpose2d_plain(node); }

// Throws unless groups and dilation are 1: the prepare / run guard of the variants that need `plain`.
inline void require_plain(const TconvDims& d, const char* variant) {
  if (d.G != 1 || d.dh != 1 || d.dw != 1)
    throw Error(std::string("cuda conv_transpose2d.") + variant + ": groups and dilation must be 1");
}

// Throws unless the stride is 2x2 and groups and dilation are 1: the segregated variants' guard.
inline void require_segregated(const TconvDims& d, const char* variant) {
  if (d.sh != 2 || d.sw != 2) throw Error(std::string("cuda conv_transpose2d.") + variant + ": stride must be 2x2");
  require_plain(d, variant);
}
// A segregated variant's call, guarded.
inline TconvCall segregated_call(const KernelCall& call, const char* variant) {
  TconvCall c = tconv_call(call);
  require_segregated(c.d, variant);
  return c;
}

inline std::pair<int, int> strides(const NodeDesc& node) {
  const auto& p = std::get<ConvTranspose2DParams>(node.params);
  return {p.stride_h, p.stride_w};
}

inline const float* host_weight(const NodeDesc& node, const char* variant) {
  if (!has_constant_weight(node))
    throw Error(std::string("cuda conv_transpose2d.") + variant + ": the weight must be a constant");
  return node.constants[1];
}

// ---- the phase decomposition (docs/kernels.md, "Phases") -------------------------------------------
// Output row oy receives x[iy] * w[ky] exactly when iy*s - pad + ky = oy, i.e. ky = r + s*j with
// phase r = (oy + pad) % s and iy = (oy + pad) / s - j. Phase r is a stride-1 correlation of the
// un-upsampled input with the taps r, r+s, ... (ceil((K-r)/s) of them) stored flipped; its outputs
// are first + s*m, and tap t of the flipped sub-kernel reads input q0 + m - (taps-1) + t.

// phase_axis / phase_taps / PhaseAxis: kernels/conv_shapes.h.

// ---- prepared state: what it was made for ------------------------------------------------------------
// Every variant's prepared weights record the precision and weight dims (input channels per group) of
// the node they were made from; run() compares them with its node's before using them.
struct PreparedFor {
  Precision precision = Precision::FP32;
  int64_t CO = 0, CI = 0, KH = 0, KW = 0;
  bool operator==(const PreparedFor&) const = default;
};
inline PreparedFor prepared_for(const TconvDims& d, Precision p) { return {p, d.CO, d.CIG, d.KH, d.KW}; }

// ---- flipped weights: [C_out][C_in/G][KH][KW] = w[g*CIG + c][co - g*COG][KH-1-ky][KW-1-kx] with
// g = co / COG (conventional, flipped_conv; for G = 1 simply [C_out][C_in] with the kernel flipped)

struct FlippedWeights {
  PreparedFor made_for;
  std::unique_ptr<DeviceArray> w;
};

std::shared_ptr<void> prepare_flipped(const NodeDesc& node);
const FlippedWeights& flipped_of(const KernelCall& call, const TconvDims& d, const char* variant);

// ---- the variant families' entry points (register.cc) --------------------------------------------

// conventional.cu: Tida et al. Algorithm 1 (zero-insertion buffer + direct convolution), any stride,
// groups and dilation.
bool conventional_applicable(const NodeDesc& node);
size_t conventional_workspace_bytes(const NodeDesc& node);
void run_conventional(const KernelCall& call);

// segregated_unified.cu: Tida et al. Algorithm 2, stride 2, one thread per output.
void run_unified(const KernelCall& call);

// segregated_gemm.cu (+ segregated_gemm_skinny.cu): the four phases as implicit GEMMs, stride 2.
bool segregated_gemm_applicable(const NodeDesc& node);
std::shared_ptr<void> prepare_segregated_gemm(const NodeDesc& node);
void run_segregated_gemm(const KernelCall& call);

// segregated_cublas.cu: the four phases' explicit columns + one batched cuBLAS GEMM, stride 2.
bool segregated_cublas_applicable(const NodeDesc& node);
size_t segregated_cublas_workspace_bytes(const NodeDesc& node);
std::shared_ptr<void> prepare_segregated_cublas(const NodeDesc& node);
void run_segregated_cublas(const KernelCall& call);
int segregated_cublas_priority(const NodeDesc& node);

// flipped_conv.cc: stride 1 as im2col + cuBLAS with the flipped kernel.
size_t flipped_workspace_bytes(const NodeDesc& node);
void run_flipped_conv(const KernelCall& call);

// gemm_col2im.cu: Caffe / PyTorch deconvolution (cuBLAS, then a gathering col2im), any stride, groups
// and dilation.
size_t col2im_workspace_bytes(const NodeDesc& node);
void run_gemm_col2im(const KernelCall& call);
int gemm_col2im_priority(const NodeDesc& node);

}  // namespace infer::cuda::tconv
