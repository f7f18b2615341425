// The small interface between the engine and every kernel (ggml-style): a kernel variant is a named
// implementation of one op on one backend with an applicability check, a workspace size, an optional
// once-per-session preparation, and a run function. Kernels see shapes, parameters and pointers only:
// never files, models or the memory planner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

struct KernelVariant {
  std::string op;       // op_name(), e.g. "conv_transpose2d"
  std::string name;     // e.g. "reference", "segregated_unified"
  std::string backend;  // "cpu" or "cuda"
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

  void add(KernelVariant variant);
  // Variants of op on backend, highest priority first.
  std::vector<const KernelVariant*> variants(const std::string& backend, const std::string& op) const;
  const KernelVariant* find(const std::string& backend, const std::string& op,
                            const std::string& name) const;
  std::vector<const KernelVariant*> all() const;

 private:
  std::vector<std::unique_ptr<KernelVariant>> variants_;
};

// Registration entry points, one per kernel folder; called by KernelRegistry::global().
void register_reference_kernels(KernelRegistry& registry);
void register_cpu_kernels(KernelRegistry& registry);
#ifdef INFER_WITH_CUDA
void register_cuda_kernels(KernelRegistry& registry);  // kernels/cuda/register.cc
#endif

}  // namespace infer
