// CUDA conv_transpose2d `cutlass`: the transposed convolution as CUTLASS's strided dgrad
// (kernels/cuda/cutlass_conv.cuh) on channels-last activations, fp16 and tf32 on tensor cores. That
// kernel is the kernel-segregation method (Tida et al.) as implicit GEMMs: the CTA grid is split by
// output phase (start row / column modulo the stride), each phase gathers only the taps that land on
// it (no zero-upsampled buffer, no column buffer) and writes its outputs in place at stride s. GEMM M =
// the phase's output pixels, N = C_out, K = taps x C_in; 128x128 block tiles, 4 warps, 3-stage cp.async
// pipeline. Any kernel size and stride, groups and dilation 1, C_in and C_out multiples of 8 (fp16) / 4
// (tf32). Bias and activation are fused: the bias enters as the epilogue's source read with all
// strides 0 (every pixel the same row), y = act(conv + bias); a per-channel PRelu (fuse_prelu; the
// functor sees no channel) by bias_activation_nhwc after the call.
#include <memory>
#include <vector>

#include "cutlass/conv/kernel/default_conv2d_dgrad.h"
#include "cutlass/conv/threadblock/threadblock_swizzle.h"

#include "kernels/cuda/conv_transpose2d/common.h"
#include "infer/kernel.h"
#include "kernels/cuda/cutlass_conv.cuh"
#include "kernels/cuda/epilogue.h"

namespace infer::cuda {
namespace {

using namespace cutlass_conv;

template <class P>
using EpilogueOp = cutlass::epilogue::thread::LinearCombinationGeneric<
    Activation, typename P::Element, 128 / cutlass::sizeof_bits<typename P::Element>::value, float, float,
    cutlass::epilogue::thread::ScaleType::Default, cutlass::FloatRoundStyle::round_to_nearest, /*IsHeavy=*/true>;

template <class P>
using DgradOp = cutlass::conv::device::ImplicitGemmConvolution<
    typename cutlass::conv::kernel::DefaultConv2dDgrad<
        typename P::Element, cutlass::layout::TensorNHWC, typename P::Element, cutlass::layout::TensorNHWC,
        typename P::Element, cutlass::layout::TensorNHWC, float, cutlass::arch::OpClassTensorOp,
        cutlass::arch::Sm80, typename P::Block, typename P::Warp, typename P::Instruction, EpilogueOp<P>,
        cutlass::conv::threadblock::StridedDgradIdentityThreadblockSwizzle<1>, P::kStages,
        cutlass::arch::OpMultiplyAdd, cutlass::conv::IteratorAlgorithm::kOptimized,
        cutlass::conv::StrideSupport::kStrided>::Kernel>;

// The node as the backward-data problem of the forward convolution from the tconv's output (N, HO,
// WO, CO: CUTLASS's activation) to its input (N, H, W, CI: CUTLASS's output gradient), filter KRSC =
// [CI][KH][KW][CO]; ok = false when the variant does not take it.
struct Problem {
  bool ok = false;
  bool has_bias = false;
  cutlass::conv::Conv2dProblemSize size;
  DeviceActivation act;
};

Problem problem_of(const NodeDesc& node) {
  Problem pr;
  if (!tconv::plain(node)) return pr;  // groups 1, dilation 1
  const int64_t a = alignment(node.precision);
  const tconv::TconvDims d = tconv::tconv_dims(node);
  if (a == 0 || d.CI % a != 0 || d.CO % a != 0 || d.pt < 0 || d.pl < 0) return pr;
  for (int64_t v : {d.N, d.CI, d.H, d.W, d.CO, d.KH, d.KW, d.HO, d.WO})
    if (v <= 0 || v > INT32_MAX) return pr;
  pr.size = cutlass::conv::Conv2dProblemSize(int(d.N), int(d.HO), int(d.WO), int(d.CO), int(d.CI), int(d.KH),
                                             int(d.KW), int(d.H), int(d.W), d.pt, d.pl, d.sh, d.sw, 1, 1,
                                             cutlass::conv::Mode::kCrossCorrelation, 1, 1);
  pr.has_bias = node.input_shapes.size() >= 3;
  pr.act = device_activation(d.act);
  pr.ok = true;
  return pr;
}

template <class P>
typename DgradOp<P>::Arguments arguments(const Problem& pr, const void* x, const void* w, const void* bias, void* y) {
  using E = typename P::Element;
  const auto& s = pr.size;
  typename EpilogueOp<P>::Params epilogue(1.f, bias ? 1.f : 0.f);
  epilogue.act = pr.act;
  return {s,
          nhwc<E>(x, s.N, s.P, s.Q, s.K),
          nhwc<E>(w, s.K, s.R, s.S, s.C),
          bias ? broadcast_rows<E>(bias) : nhwc<E>(y, s.N, s.H, s.W, s.C),
          nhwc<E>(y, s.N, s.H, s.W, s.C),
          epilogue};
}

bool applicable(const NodeDesc& node) {
  const Problem pr = problem_of(node);
  if (!pr.ok || !has_constant_weight(node)) return false;
  // CUTLASS's own checks on the shapes alone (tensors under 2 GiB, grid size).
  return with_traits(node.precision, [&](auto t) {
    using P = decltype(t);
    return DgradOp<P>::can_implement(arguments<P>(pr, nullptr, nullptr, nullptr, nullptr)) == cutlass::Status::kSuccess;
  });
}

struct State {
  Problem pr;
  std::unique_ptr<DeviceArray> weights;  // KRSC [CI][KH][KW][CO] in the node's precision
};

std::shared_ptr<void> prepare(const NodeDesc& node) {
  auto st = std::make_shared<State>();
  st->pr = problem_of(node);
  if (!st->pr.ok)
    throw Error("cuda conv_transpose2d.cutlass: the node is not one it takes (NHWC fp16 / tf32, aligned "
                "channels, groups and dilation 1)");
  const auto& s = st->pr.size;
  std::vector<float> krsc(static_cast<size_t>(int64_t(s.K) * s.R * s.S * s.C));
  krsc_from_kcrs(tconv::host_weight(node, "cutlass"), s.K, s.C, s.R, s.S, krsc.data());
  st->weights = upload(krsc.data(), krsc.size(), node.precision);
  return st;
}

void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda conv_transpose2d.cutlass: not prepared");
  const State& st = *static_cast<const State*>(call.prepared);
  const tconv::TconvCall c = tconv::tconv_call(call);
  const void* bias = st.pr.has_bias ? c.bias : nullptr;
  with_traits(call.node.precision, [&](auto t) {
    using P = decltype(t);
    launch<DgradOp<P>>(arguments<P>(st.pr, c.x, st.weights->data(), bias, c.y), context_of(call).stream,
                       "conv_transpose2d.cutlass");
  });
  if (c.slope)  // the activation is ActivationKind::PRelu, the identity in the library's epilogue
    bias_activation_nhwc(context_of(call), call.node.precision, c.y, nullptr, c.d.N * c.d.HO * c.d.WO, c.d.CO,
                         c.d.act, nullptr, c.slope);
}

// An --autotune / --kernel candidate, not a default: slower than cuDNN on 32 of 36 generator layers
// measured, ahead on three tf32 ones (H100, 2026-11-25, docs/benchmarks.md "CUTLASS against cuDNN").
int priority(const NodeDesc& node) { return problem_of(node).ok ? 3 : 0; }

}  // namespace

INFER_REGISTER_KERNELS(conv_transpose2d_cutlass) {
  registry.add("cuda", {
      {.op = "conv_transpose2d", .name = "cutlass", .priority = 3, .priority_for = priority,
       .layouts = {Layout::NHWC}, .fuses_prelu = true, .applicable = applicable, .prepare = prepare, .run = run},
  });
}

}  // namespace infer::cuda
