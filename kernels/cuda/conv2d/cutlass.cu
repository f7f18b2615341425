// CUDA conv2d `cutlass`: CUTLASS's implicit-GEMM forward convolution (kernels/cuda/cutlass_conv.cuh)
// on channels-last activations, fp16 and tf32 on tensor cores. GEMM M = N x H_out x W_out output
// pixels, N = C_out, K = KH x KW x C_in; each 128x128 block tile of the output is one CTA of 4 warps
// (64x64 each), K walked in 64 (fp16) or 32 (tf32) channel slices per tap through a 3-stage cp.async
// pipeline. Any kernel size (<= 32), stride and padding (asymmetric too: the output size is given),
// groups and dilation 1, C_in and C_out multiples of 8 (fp16) / 4 (tf32). The whole epilogue is fused
// (CUTLASS's broadcast epilogue): y = act(conv + bias + residual), any activation infer has; a
// per-channel PRelu (fuse_prelu; the functor sees no channel) by bias_activation_nhwc after the call.
#include <memory>
#include <variant>
#include <vector>

#include "cutlass/conv/kernel/default_conv2d_fprop_with_broadcast.h"

#include "kernels/conv_shapes.h"
#include "kernels/cuda/conv2d/common.h"
#include "infer/kernel.h"
#include "kernels/cuda/cutlass_conv.cuh"
#include "kernels/cuda/epilogue.h"

namespace infer::cuda {
namespace {

using namespace cutlass_conv;

template <class P>
using EpilogueOp = cutlass::epilogue::thread::LinearCombinationBiasElementwise<
    typename P::Element, float, float, typename P::Element, typename P::Element,
    128 / cutlass::sizeof_bits<typename P::Element>::value, Activation<float>, cutlass::plus<float>,
    /*StoreT=*/false, typename P::Element>;

template <class P>
using FpropOp = cutlass::conv::device::ImplicitGemmConvolution<
    typename cutlass::conv::kernel::DefaultConv2dFpropWithBroadcast<
        typename P::Element, cutlass::layout::TensorNHWC, typename P::Element, cutlass::layout::TensorNHWC,
        typename P::Element, cutlass::layout::TensorNHWC, float, cutlass::arch::OpClassTensorOp,
        cutlass::arch::Sm80, typename P::Block, typename P::Warp, typename P::Instruction, EpilogueOp<P>,
        cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<4>, P::kStages,
        cutlass::arch::OpMultiplyAdd, cutlass::conv::IteratorAlgorithm::kOptimized>::Kernel>;

// The node as CUTLASS's problem; ok = false when the variant does not take it.
struct Problem {
  bool ok = false;
  cutlass::conv::Conv2dProblemSize size;
};

Problem problem_of(const NodeDesc& node) {
  Problem pr;
  if (!conv2d_ungrouped(node) || node.output_shapes.size() != 1 || node.input_shapes.size() < 2) return pr;
  const int64_t a = alignment(node.precision);
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  if (a == 0 || x.size() != 4 || w.size() != 4 || y.size() != 4) return pr;
  for (const Shape* s : {&x, &w, &y})
    for (int64_t d : *s)
      if (d <= 0 || d > INT32_MAX) return pr;
  const ConvProblem g = conv2d_problem(node);
  if (g.C % a != 0 || w[0] % a != 0 || g.pad_top < 0 || g.pad_left < 0) return pr;
  pr.size = cutlass::conv::Conv2dProblemSize(
      int(x[0]), int(g.H), int(g.W), int(g.C), int(w[0]), int(g.KH), int(g.KW), int(g.HO), int(g.WO),
      int(g.pad_top), int(g.pad_left), int(g.stride_h), int(g.stride_w), 1, 1,
      cutlass::conv::Mode::kCrossCorrelation, 1, 1);
  pr.ok = true;
  return pr;
}

template <class P>
typename FpropOp<P>::Arguments arguments(const cutlass::conv::Conv2dProblemSize& s, const void* x, const void* w,
                                         const void* bias, const void* residual, void* y, DeviceActivation act) {
  using E = typename P::Element;
  typename EpilogueOp<P>::Params epilogue(1.f, residual ? 1.f : 0.f, ActivationArgs{act});
  return {s,
          nhwc<E>(x, s.N, s.H, s.W, s.C),
          nhwc<E>(w, s.K, s.R, s.S, s.C),
          nhwc<E>(residual ? residual : y, s.N, s.P, s.Q, s.K),
          nhwc<E>(y, s.N, s.P, s.Q, s.K),
          epilogue,
          cutlass::conv::SplitKMode::kSerial,
          const_cast<void*>(bias),
          nullptr,
          0,
          0};
}

bool applicable(const NodeDesc& node) {
  const Problem pr = problem_of(node);
  if (!pr.ok || !has_constant_weight(node)) return false;
  // CUTLASS's own checks (filter size <= 32, tensors under 2 GiB, grid size) on the shapes alone.
  return with_traits(node.precision, [&](auto t) {
    using P = decltype(t);
    return FpropOp<P>::can_implement(arguments<P>(pr.size, nullptr, nullptr, nullptr, nullptr, nullptr, {})) ==
           cutlass::Status::kSuccess;
  });
}

struct State {
  Problem pr;
  std::unique_ptr<DeviceArray> weights;  // KRSC in the node's precision
  DeviceActivation act;
};

std::shared_ptr<void> prepare(const NodeDesc& node) {
  auto st = std::make_shared<State>();
  st->pr = problem_of(node);
  if (!st->pr.ok || !has_constant_weight(node))
    throw Error("cuda conv2d.cutlass: the node is not a convolution it takes (NHWC fp16 / tf32, aligned "
                "channels, groups and dilation 1, a constant weight)");
  const auto& s = st->pr.size;
  std::vector<float> krsc(static_cast<size_t>(int64_t(s.K) * s.R * s.S * s.C));
  krsc_from_kcrs(node.constants[1], s.K, s.C, s.R, s.S, krsc.data());
  st->weights = upload(krsc.data(), krsc.size(), node.precision);
  st->act = device_activation(std::get<Conv2DParams>(node.params).activation);
  return st;
}

void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda conv2d.cutlass: not prepared");
  const State& st = *static_cast<const State*>(call.prepared);
  const conv::ConvCall c = conv::conv_call(call);
  with_traits(call.node.precision, [&](auto t) {
    using P = decltype(t);
    launch<FpropOp<P>>(arguments<P>(st.pr.size, c.x, st.weights->data(), c.bias, c.residual, c.y, st.act),
                       context_of(call).stream, "conv2d.cutlass");
  });
  if (c.slope) {  // st.act is ActivationKind::PRelu, the identity in the library's epilogue
    const auto& s = st.pr.size;
    bias_activation_nhwc(context_of(call), call.node.precision, c.y, nullptr, int64_t(s.N) * s.P * s.Q, s.K,
                         fused_activation(call.node.params), nullptr, c.slope);
  }
}

// An --autotune / --kernel candidate, not a default: slower than cuDNN on every VGG / AlexNet layer
// measured (H100, 2026-11-25, docs/benchmarks.md "CUTLASS against cuDNN").
int priority(const NodeDesc& node) { return problem_of(node).ok ? 3 : 0; }

}  // namespace

INFER_REGISTER_KERNELS(conv2d_cutlass) {
  registry.add("cuda", {
      // Static priority 2: the registry's order (by file path) put cutlass.cu before small_cout_nhwc.cu,
      // whose direct_small_cout_nhwc ties with it at 3; 2 keeps that variant first on the tie, as before.
      {.op = "conv2d", .name = "cutlass", .priority = 2, .priority_for = priority, .layouts = {Layout::NHWC},
       .fuses_prelu = true, .applicable = applicable, .prepare = prepare, .run = run},
  });
}

}  // namespace infer::cuda
