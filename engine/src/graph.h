// The engine's in-memory model: values (tensors) and nodes in execution order, built by the loader
// from a verified file and rewritten by graph passes. Constants are float32 host arrays: used in place
// from the mmapped file when stored as f32, converted once into owned storage when f16, i8, u8 or i32
// (integers widened to float). A dequantize_linear of a constant is folded at load into a constant
// that remembers its integer source (Value::dequantized), for int8 kernels to come.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "infer/model.h"
#include "infer/ops.h"

namespace infer::detail {

struct Value {
  std::string name;
  Shape shape;                   // declared shape; a leading -1 is the batch (activations only)
  DType dtype = DType::F32;      // as stored in the file
  const float* data = nullptr;   // constants: shape_numel(shape) floats; nullptr for activations
  Layout layout = Layout::NCHW;  // memory order of a 4-D activation (the channels_last pass sets it)
  const uint8_t* raw = nullptr;  // i8 / u8 / i32 constants: the stored little-endian bytes (the file's)
  // What a constant folded from dequantize_linear(source, scale, zero_point) at load came from: value
  // ids (zero_point -1 when absent; the source is an i8 / u8 / i32 constant) and the node's axis.
  struct Dequantized {
    int source = -1, scale = -1, zero_point = -1;
    int axis = 1;
  };
  std::optional<Dequantized> dequantized;
  // An activation the quantized_activations pass keeps in 8 bits (its producer's QuantizedConv2DParams::
  // y_dtype): one byte an element in the arena instead of a float.
  bool stored_8bit = false;
  bool is_constant() const { return data != nullptr; }
};

struct Node {
  std::string name;
  OpParams params;
  std::vector<int> inputs;   // value ids: data first, then constants
  std::vector<int> outputs;
  std::vector<std::string> fused;  // names of nodes merged into this one by passes (for the profile)
  Layout layout = Layout::NCHW;    // layout of its 4-D activations (NodeDesc::layout)
  OpType op() const { return op_type(params); }
};

struct Graph {
  std::string origin;  // file path or "<memory>", for messages
  uint32_t format_version = kFormatVersion;
  std::string name, description, producer;
  std::map<std::string, std::string> metadata;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs, outputs;
  std::vector<TensorInfo> input_infos, output_infos;  // for Model's accessors
  uint64_t weight_bytes = 0;

  // Keep-alive for memory that `Value::data` points into: the mapped file, converted f16 weights and
  // constants made by passes (folded BatchNorm).
  std::vector<std::shared_ptr<const void>> storage;

  // Adds a constant owning its data; returns its id.
  int add_constant(std::string name, Shape shape, std::vector<float> data);
};

// Node `step` for messages: "<origin>: node <step> '<name>' (<op>)".
std::string node_where(const Graph& graph, size_t step);

}  // namespace infer::detail
