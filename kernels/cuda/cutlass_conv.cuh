// What the CUTLASS convolution variants (conv2d/cutlass.cu, conv_transpose2d/cutlass.cu) share: the
// element types and tile shapes per precision, infer's activations as a CUTLASS epilogue functor, and
// one launch helper. CUTLASS 2.x implicit GEMM (NVIDIA's CUTLASS, "Implicit GEMM Convolution",
// docs/implicit_gemm_convolution.md there): channels-last activations and KRSC filters are read in
// place by the GEMM's tile iterators (no column buffer, no padding pass: out-of-image taps load zeros),
// staged through shared memory by a multistage cp.async pipeline and multiplied with mma.sync on tensor
// cores (the Sm80 kernels, run on sm_90). CUDA-C only; CUTLASS's headers come from scripts/fetch-cutlass.sh.
#pragma once

#include <string>

#include "cutlass/cutlass.h"
#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/device/implicit_gemm_convolution.h"
#include "cutlass/epilogue/thread/linear_combination_bias_elementwise.h"
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/numeric_types.h"

#include "kernels/cuda/common.cuh"

namespace infer::cuda::cutlass_conv {

// ---- precisions -------------------------------------------------------------------------------
// fp16: half operands and outputs, m16n8k16, 128x128x64 block tiles, 3 stages (96 KiB of shared memory).
// tf32: float in memory, rounded to tf32 by the warp-level MMA (CUTLASS's float + OpMultiplyAdd),
// m16n8k8, 128x128x32 tiles, 3 stages. Both accumulate and run the epilogue in float. Alignment: every
// channel count a multiple of one 16-byte access (8 halves, 4 floats).
struct Fp16 {
  using Element = cutlass::half_t;
  using Instruction = cutlass::gemm::GemmShape<16, 8, 16>;
  using Block = cutlass::gemm::GemmShape<128, 128, 64>;
  using Warp = cutlass::gemm::GemmShape<64, 64, 64>;
  static constexpr int kStages = 3;
  static constexpr int kAlignment = 8;
};
struct Tf32 {
  using Element = float;
  using Instruction = cutlass::gemm::GemmShape<16, 8, 8>;
  using Block = cutlass::gemm::GemmShape<128, 128, 32>;
  using Warp = cutlass::gemm::GemmShape<64, 64, 32>;
  static constexpr int kStages = 3;
  static constexpr int kAlignment = 4;
};

// The channel alignment a precision needs; 0 where no CUTLASS variant runs (strict fp32 stays exact).
inline int64_t alignment(Precision p) {
  return p == Precision::FP16 ? Fp16::kAlignment : p == Precision::TF32 ? Tf32::kAlignment : 0;
}

// Returns f(Fp16{}) or f(Tf32{}) for a node's precision (fp16 or tf32), as common.cuh's dispatch does
// for storage types: `with_traits(p, [&](auto t) { using P = decltype(t); ... })`.
template <class F>
auto with_traits(Precision p, F&& f) {
  return p == Precision::FP16 ? f(Fp16{}) : f(Tf32{});
}

// ---- infer's activations as CUTLASS's epilogue functor ---------------------------------------------
// One kernel serves every activation: the kind travels in the epilogue's parameters (DeviceActivation)
// and activate() (common.cuh) switches on it, as infer's own epilogues do.
struct ActivationArgs {
  DeviceActivation act;
};

template <class T>
struct Activation;  // T: float (one value) or cutlass::Array<float, N> (a fragment)

template <>
struct Activation<float> {
  using Arguments = ActivationArgs;
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE float operator()(float x, const Arguments& a) const { return activate(a.act, x); }
};

template <int N>
struct Activation<cutlass::Array<float, N>> {
  using Arguments = ActivationArgs;
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE cutlass::Array<float, N> operator()(const cutlass::Array<float, N>& x, const Arguments& a) const {
    cutlass::Array<float, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = activate(a.act, x[i]);
    return y;
  }
};

// ---- launching ------------------------------------------------------------------------------------

// Checks, initialises and launches one CUTLASS convolution on `stream`; any CUTLASS status but success
// is an infer::Error naming the variant. No workspace: no split-K.
template <class Op>
void launch(const typename Op::Arguments& args, cudaStream_t stream, const char* variant) {
  Op op;
  cutlass::Status st = op.can_implement(args);
  if (st == cutlass::Status::kSuccess) st = op.initialize(args, nullptr, stream);
  if (st == cutlass::Status::kSuccess) st = op(stream);
  if (st != cutlass::Status::kSuccess)
    throw Error(std::string("cuda ") + variant + ": CUTLASS " + cutlassGetStatusString(st));
}

// A packed NHWC tensor of the given extent (N, H, W, C).
template <class T>
cutlass::TensorRef<T, cutlass::layout::TensorNHWC> nhwc(const void* p, int n, int h, int w, int c) {
  return {static_cast<T*>(const_cast<void*>(p)), cutlass::layout::TensorNHWC::packed({n, h, w, c})};
}

// A per-channel vector read as an NHWC tensor whose every pixel is the same row (all strides 0): how a
// CUTLASS epilogue without a broadcast operand takes the bias, as its source C with beta = 1.
template <class T>
cutlass::TensorRef<T, cutlass::layout::TensorNHWC> broadcast_rows(const void* p) {
  return {static_cast<T*>(const_cast<void*>(p)), cutlass::layout::TensorNHWC(cutlass::layout::TensorNHWC::Stride(0))};
}

}  // namespace infer::cuda::cutlass_conv
