// The op table: one OpDef per op of infer/ops.h, each defined once in engine/ops/<op>.cc and listed
// once by INFER_OPS (infer/ops.h). The loader, the model builder, shape inference, the cost
// model and the reference backend loop over this table instead of switching on OpType. Every OpDef is
// constant-initialised (no constructor runs), so the table is valid before any static initialiser.
#pragma once

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "infer/kernel.h"
#include "infer/ops.h"
#include "model_generated.h"

namespace infer::detail {

class Inputs;  // engine/ops/op_util.h

// A node's options as the schema's union stores them: the union tag and the table.
using FbOptions = std::pair<fb::Op, flatbuffers::Offset<void>>;

// Which inputs of a node must be constants (weights, statistics) and which activations.
enum class InputKinds : uint8_t {
  Data,            // every input is an activation
  DataThenParams,  // input 0 is the activation, every later one a constant (a parameter)
  Any,             // each input may be either; at least one is an activation (binary)
  // Input 0 an activation or a constant, every later one a constant (quantize_linear,
  // dequantize_linear): a node of constants only is evaluated when the model loads (the loader
  // replaces it by its output, a constant), so it never runs in a session.
  FoldableThenParams,
};

struct OpDef {
  // ---- the file form (schema/model.fbs: fb::Op is OpType + 1). Both are nullptr for engine-internal
  // ops, which graph passes make and no file holds. `where` names the node in messages.
  OpParams (*read)(const fb::Node& node, const std::string& where) = nullptr;
  FbOptions (*write)(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) = nullptr;

  // ---- inputs: which must be constants, and what they are called in messages ("input 1 (weight)").
  InputKinds inputs = InputKinds::Data;
  const char* roles[6] = {};  // roles[i] names input i; nullptr: none (input 0 is the data)

  // ---- the shape rule, which is also where parameters are validated (one message for the loader,
  // the builder and the kernel-call checks). `constant` (one flag per input, or nullptr) enables the
  // rules that depend on which inputs are constants. Throws infer::Error "<where>: <what>".
  std::vector<Shape> (*shape)(const std::string& where, const OpParams& params, const Inputs& in,
                              const std::vector<bool>* constant) = nullptr;

  // ---- cost: FLOPs of one node at concrete shapes (engine/src/cost.cc's conventions); nullptr = 0.
  double (*flops)(const NodeDesc& node) = nullptr;

  // ---- the activation the op applies to its result (fused epilogue); nullptr = none.
  Activation (*activation)(const OpParams& params) = nullptr;
  // The op takes the engine-internal per-channel PRelu epilogue (ActivationKind::PRelu, its slope as
  // input 3: the shape rule checks it, the reference kernel applies it): what fuse_prelu may fuse into.
  bool prelu_epilogue = false;

  // ---- the reference kernel (kernels/reference/): registered as variant "reference" on "cpu" at
  // priority 0, in NCHW, or in either layout with reference_any_layout (layout reads `from`, writes `to`).
  void (*reference)(const KernelCall& call) = nullptr;
  bool reference_any_layout = false;
};

// The definition of `op`; infer::Error for a value outside OpType.
const OpDef& op_def(OpType op);

// Ops whose inputs may each be a constant or an activation (binary: a per-channel scale may come
// first or second); the shape rule then checks how constants broadcast.
inline bool any_input_kind(OpType op) { return op_def(op).inputs == InputKinds::Any; }
// What input i of `op` is called in messages ("weight", "scale"), nullptr when it has no name.
inline const char* input_role(OpType op, size_t i) {
  const OpDef& def = op_def(op);
  return i < std::size(def.roles) ? def.roles[i] : nullptr;
}

// One object per op, named <name>_op, defined in engine/ops/<name>.cc (or the file of its family).
#define INFER_OP_DECLARE_DEF(type, params, name) extern const OpDef name##_op;
INFER_OPS(INFER_OP_DECLARE_DEF)
#undef INFER_OP_DECLARE_DEF

}  // namespace infer::detail

// The reference kernels' adapters, one per op: ref::run_<name> unpacks a KernelCall into the plain
// function of kernels/reference/reference.h. Defined next to that function in kernels/reference/.
namespace infer::ref {
#define INFER_OP_DECLARE_REFERENCE(type, params, name) void run_##name(const KernelCall& call);
INFER_OPS(INFER_OP_DECLARE_REFERENCE)
#undef INFER_OP_DECLARE_REFERENCE
}  // namespace infer::ref
