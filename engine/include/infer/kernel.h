// The kernel interface: what a kernel author implements and what the engine, the benchmarks and the
// tests call (ggml-style). A kernel variant is a named implementation of one op on one backend with an
// applicability check, a workspace size, an optional once-per-session preparation and a run function;
// it sees shapes, parameters and pointers only, never files, models or the memory planner. A kernel
// file registers its variants itself (INFER_REGISTER_KERNELS below). Public API: C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "infer/cpu_isa.h"
#include "infer/ops.h"

namespace infer {

// Everything a kernel may know about the node it runs: parameters, concrete shapes (batch fixed) and,
// for constant inputs (weights), their float32 host data (nullptr for activations).
struct NodeDesc {
  OpParams params;
  std::vector<Shape> input_shapes;
  std::vector<Shape> output_shapes;
  std::vector<const float*> constants;  // one per input; always float32 host data
  Precision precision = Precision::FP32;  // infer/ops.h; the cpu backend runs FP32 only
  // Memory layout of the node's 4-D activations, inputs and outputs alike (the channels_last pass
  // decides it per node; tensors of other ranks have no layout). A layout node's inputs are in
  // LayoutParams::from, its output in `to` (== this field). Shapes stay NCHW-ordered in either case.
  Layout layout = Layout::NCHW;
  // The CPU instruction-set level cpu kernels compiled per level run at (kernels/cpu/isa.h), fixed for
  // the session: prepare(), workspace_bytes() and run() of one node all see the same level. Defaults to
  // the process's level (INFER_CPU_ISA), so kernel tests that build a NodeDesc honour the cap.
  CpuIsa isa = cpu_isa_default();
};

// One call of a kernel: device-side pointers for its backend (host pointers on cpu). The pointers are
// typed float*, but under Precision::FP16 they point at IEEE half data (activations and constants
// alike) and the kernel reinterprets them.
struct KernelCall {
  const NodeDesc& node;
  std::vector<const float*> inputs;   // activations and constants, in node input order
  std::vector<float*> outputs;
  void* workspace = nullptr;          // workspace_bytes(node) bytes, 256-byte aligned, from the arena
  const void* prepared = nullptr;     // what prepare() returned, if any
  void* context = nullptr;            // the backend's execution context: nullptr on cpu; on cuda a
                                      // cuda::Context* (stream, cuBLAS handles; kernels/cuda/context.h)
};

// Declared as a table row with designated initialisers (C++20), e.g.
//   registry.add("cpu", {{.op = "conv2d", .name = "im2col_gemm", .priority = 10,
//                         .applicable = ..., .workspace_bytes = ..., .run = ...}});
// fields left out keep the defaults below. `run` may assume the call passed check_kernel_call: the
// op's input count, shapes and parameter type are right (its own limits it checks in `applicable`).
struct KernelVariant {
  std::string op;       // op_name(), e.g. "conv_transpose2d"
  std::string name;     // e.g. "reference", "segregated_unified"
  std::string backend;  // "cpu" or "cuda"; set by KernelRegistry::add(backend, ...)
  int priority = 0;     // default heuristic: the applicable variant with the highest priority runs
  // A shape-dependent priority that replaces `priority` when set (e.g. a variant that wins only on
  // small spatial sizes); ties keep registration order.
  std::function<int(const NodeDesc&)> priority_for;
  // The layouts (NodeDesc::layout) the variant runs in. The session never offers a variant a node in
  // another layout, so a kernel written for NCHW needs no check of its own.
  std::vector<Layout> layouts{Layout::NCHW};
  // A graph pass (PassOptions name, e.g. "fold_width") the variant belongs to: offered only when that
  // pass is on. Empty: always offered.
  std::string requires_pass;
  // cpu: what the profile reports as the node's instruction set (NodeInfo::isa). PerIsa: compiled for
  // every CpuIsa level and dispatched on NodeDesc::isa (kernels/cpu/isa.h); Baseline: plain code
  // compiled for baseline x86-64 only; OpenBlas: the work is OpenBLAS's (its own CPU dispatch).
  enum class Isa : uint8_t { Baseline, PerIsa, OpenBlas };
  Isa isa = Isa::Baseline;
  // The variant applies the engine-internal per-channel PRelu epilogue (ActivationKind::PRelu: the
  // slope is the node's last input, prelu_slope() below). A node with one is offered only to variants
  // that say so (variant_applies), so the fuse_prelu pass fuses only where one of them runs it.
  bool fuses_prelu = false;
  // The variant applies conv2d's engine-internal input epilogue (Conv2DParams::input_epilogue); a node
  // with one is offered only to variants that say so (variant_applies).
  bool fuses_input_epilogue = false;
  std::function<bool(const NodeDesc&)> applicable;          // empty: always applicable
  std::function<size_t(const NodeDesc&)> workspace_bytes;   // empty: none
  std::function<std::shared_ptr<void>(const NodeDesc&)> prepare;  // empty: nothing to prepare
  std::function<void(const KernelCall&)> run;
};

// True when `v` runs in `layout`, takes the node's per-channel PRelu epilogue if it has one
// (v.fuses_prelu) and a conv2d's input epilogue if it has one (v.fuses_input_epilogue) and, if it has
// a check, applies to `node` (node.layout is checked first).
bool variant_applies(const KernelVariant& v, const NodeDesc& node);

// The per-channel slopes of a node whose fused activation is ActivationKind::PRelu (its last input:
// one per output channel, in the call's precision), else nullptr. Pair it with channel_activation().
inline const float* prelu_slope(const KernelCall& call) {
  return fused_activation(call.node.params).kind == ActivationKind::PRelu ? call.inputs.back() : nullptr;
}

class KernelRegistry {
 public:
  // The process-wide registry, filled with every built backend's kernels on first use.
  static const KernelRegistry& global();

  // Adds one backend's variants (their `backend` is set here). Each variant's run is wrapped so that
  // every call is checked by check_kernel_call first, whoever makes it (session, tests, benchmarks).
  void add(const std::string& backend, std::vector<KernelVariant> variants);
  // Variants of op on backend, highest priority first.
  std::vector<const KernelVariant*> variants(const std::string& backend, const std::string& op) const;
  const KernelVariant* find(const std::string& backend, const std::string& op,
                            const std::string& name) const;
  std::vector<const KernelVariant*> all() const;

 private:
  std::vector<std::unique_ptr<KernelVariant>> variants_;
};

// An op's axis parameter (negative counts from the end) as an index into s; check_kernel_call has
// already rejected an axis out of range.
inline int resolved_axis(int axis, const Shape& s) {
  return axis < 0 ? axis + static_cast<int>(s.size()) : axis;
}

// Throws an infer::Error ("<backend> <op>.<variant>: ...") unless the call fits the op's rules: the
// parameter type, the number of inputs (non-null, each with a shape, no negative dimension), one
// output, and the op's shape relations (kernel_checks.cc: one table for every backend).
void check_kernel_call(const KernelVariant& variant, const KernelCall& call);

// --- Registration --------------------------------------------------------------------------------
// A cpu or cuda kernel file registers its variants itself, with no edit of any other file:
//   INFER_REGISTER_KERNELS(conv2d_winograd) {
//     registry.add("cpu", {{.op = "conv2d", .name = "winograd", .priority = 20, .run = ...}});
//   }
// defines the body as a function of `registry` and a static object that queues it while libinfer is
// loaded; KernelRegistry::global() runs the reference kernels' registration first, then the queued
// functions in the order of their source files' paths (so variants of equal priority keep one order
// whatever the link order; ties keep that order, KernelVariant::priority_for). NAME only has to be
// unique in its file. libinfer is a shared library (CMakeLists.txt): a static archive would let the
// linker drop the kernel files nothing else references, and their registrations with them.
using KernelRegistrar = void (*)(KernelRegistry& registry);
struct KernelRegistration {
  KernelRegistration(const char* source_file, KernelRegistrar registrar);
};
#define INFER_REGISTER_KERNELS(NAME)                                                                \
  static void infer_register_kernels_##NAME(::infer::KernelRegistry& registry);                    \
  [[maybe_unused]] static const ::infer::KernelRegistration infer_kernel_registration_##NAME(      \
      __FILE__, &infer_register_kernels_##NAME);                                                    \
  static void infer_register_kernels_##NAME(::infer::KernelRegistry& registry)

// The reference kernels' registration (kernels/reference/register.cc), run before the queued ones.
void register_reference_kernels(KernelRegistry& registry);

// --- Convolution geometry -------------------------------------------------------------------------
// One 2-D convolution as the cpu and cuda kernels compute it: N images of C input channels (of one
// group) and H x W pixels, a KH x KW kernel, stride, top/left padding (an offset: may be negative),
// dilation, and an output of HO x WO, given rather than derived so that callers with output_padding,
// cropped or phase-split outputs describe exactly the outputs they want. Tap (ky, kx) of output
// (oy, ox) reads input (oy*stride_h - pad_top + ky*dilation_h, ox*stride_w - pad_left + kx*dilation_w).
// box > 1 (cuda's im2col only): every column element is the sum of box x box input cells
// box_stride_h / box_stride_w apart (conv_pool2d's direct_sum); 1 elsewhere.
struct ConvProblem {
  int64_t N = 1;                           // images
  int64_t C = 0, H = 0, W = 0;             // input channels of one group, spatial size
  int64_t K = 0;                           // output channels, all groups (0 where a caller needs none)
  int64_t groups = 1;
  int64_t KH = 1, KW = 1;                  // kernel size
  int64_t stride_h = 1, stride_w = 1;      // > 0
  int64_t pad_top = 0, pad_left = 0;       // may be negative
  int64_t HO = 0, WO = 0;                  // output size
  int64_t dilation_h = 1, dilation_w = 1;  // > 0
  int64_t box = 1, box_stride_h = 1, box_stride_w = 1;

  // The im2col column matrix of one image and group: [C*KH*KW][HO*WO] (the GEMM's K x N).
  constexpr int64_t col_rows() const { return C * KH * KW; }
  constexpr int64_t col_cols() const { return HO * WO; }
  constexpr int64_t col_elements() const { return col_rows() * col_cols(); }
};

// The problem of a conv2d node (x [N,C_in,H,W], w [K,C_in/groups,KH,KW], y [N,K,HO,WO]): C is
// C_in/groups (group gi reads input channels gi*C ... and writes output channels gi*K/groups ...).
// An infer::Error for shapes of the wrong rank or that do not fit together.
ConvProblem conv2d_problem(const Conv2DParams& p, const Shape& x_shape, const Shape& w_shape,
                           const Shape& y_shape);
ConvProblem conv2d_problem(const NodeDesc& node);  // a conv2d node's parameters and shapes

// True when im2col is the identity (1x1 kernel, stride 1, no padding, output = input size, no box):
// an image x [C, H*W] is then already its column matrix.
bool im2col_is_identity(const ConvProblem& g);

// The bytes of the zero-upsampled and padded input of a conv_transpose2d layer, one float32 sample:
// what the conventional method (zero insertion, then a convolution) allocates and the segregated
// methods do not (Tida et al., Table 4's memory column). An infer::Error for shapes not of rank 4 or
// padding the kernel does not cover.
uint64_t conv_transpose2d_upsampled_bytes(const ConvTranspose2DParams& p, const Shape& x_shape,
                                          const Shape& w_shape);

}  // namespace infer
