// infer::Model: a loaded, verified and validated model. load() mmaps the file, runs the FlatBuffers
// verifier and the semantic validation (indices, buffer sizes, op parameters, shapes, order); any
// problem is an infer::Error naming the file, node and field. A Model is immutable and cheap to copy.
//
// Thread safety: every member of Model is const and a Model never changes after load(), so one Model
// (or copies of it, which share the loaded graph and the mapped file) may be used from any number of
// threads at once, e.g. to create one Session per thread (infer/session.h). Loading is reentrant.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "infer/ops.h"

namespace infer {

namespace detail {
struct Graph;
}

struct TensorInfo {
  std::string name;
  Shape shape;  // a leading -1 is the batch dimension
  DType dtype = DType::F32;
};

// One node of the model file as stored (before any graph pass): what apps need to find a layer, e.g.
// the value whose activations `SessionOptions::extra_outputs` should return.
struct ModelNode {
  std::string name;
  std::string op;                   // op_name(), e.g. "dense"
  std::vector<std::string> inputs;  // value names: data first, then constants (weights)
  std::vector<std::string> outputs;
  OpParams params;  // its parameters as stored (infer/ops.h): enough to rebuild it with ModelBuilder
};

// One constant (weight) of the model file as stored: float32 data that stays valid as long as the
// Model (or a copy of it) does.
struct ModelConstant {
  std::string name;
  Shape shape;
  const float* data = nullptr;  // shape_numel(shape) floats
  // Folded at load from an integer tensor through dequantize_linear (a QDQ model's weight): `data`
  // holds the dequantized floats.
  bool dequantized = false;
};

// The format version this build writes and the newest it reads.
constexpr uint32_t kFormatVersion = 1;

class Model {
 public:
  static Model load(const std::string& path);
  // Parses an in-memory file; `origin` names it in error messages.
  static Model from_bytes(std::vector<uint8_t> bytes, const std::string& origin = "<memory>");

  const std::string& name() const;
  const std::string& description() const;
  const std::string& producer() const;
  uint32_t format_version() const;
  const std::map<std::string, std::string>& metadata() const;
  // metadata value for key, or fallback when absent.
  std::string meta(const std::string& key, const std::string& fallback = "") const;

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  size_t num_nodes() const;
  std::vector<ModelNode> nodes() const;  // in execution order
  uint64_t weight_bytes() const;  // bytes of all constants as stored in the file
  std::vector<ModelConstant> constants() const;  // in value order
  // The file path load() was given, or from_bytes()'s `origin`: how messages name the model.
  const std::string& origin() const;
  // Floating-point operations of one forward pass at `batch` (a multiply-add counts 2), as the
  // profile's cost model counts them, over the graph as stored (before any graph pass). An Error when
  // the graph cannot take that batch.
  double flops(int64_t batch = 1) const;

  // The engine's view of the model; not part of the stable API.
  const detail::Graph& graph() const;

 private:
  std::shared_ptr<const detail::Graph> graph_;
  explicit Model(std::shared_ptr<const detail::Graph> g) : graph_(std::move(g)) {}
};

}  // namespace infer
