// The small interface the engine owns and every kernel implements (ggml-style): a kernel variant is a
// named implementation of one op on one backend with an applicability check, a workspace size, an
// optional once-per-session preparation, and a run function. Kernels see shapes, parameters and
// pointers only: never files, models or the memory planner. The registry checks every call's arguments
// against the op's rules once (kernel_checks.cc) before any variant runs, for all backends.
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
  std::function<bool(const NodeDesc&)> applicable;          // empty: always applicable
  std::function<size_t(const NodeDesc&)> workspace_bytes;   // empty: none
  std::function<std::shared_ptr<void>(const NodeDesc&)> prepare;  // empty: nothing to prepare
  std::function<void(const KernelCall&)> run;
};

// True when `v` runs in `layout` and, if it has a check, applies to `node` (node.layout is checked
// against v.layouts first).
bool variant_applies(const KernelVariant& v, const NodeDesc& node);

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

// Registration entry points, one per kernel folder; called by KernelRegistry::global().
void register_reference_kernels(KernelRegistry& registry);
void register_cpu_kernels(KernelRegistry& registry);
#ifdef INFER_WITH_CUDA
void register_cuda_kernels(KernelRegistry& registry);  // kernels/cuda/register.cc
#endif

}  // namespace infer
