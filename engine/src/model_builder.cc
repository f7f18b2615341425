// infer::ModelBuilder: records tensors and nodes, infers every node's output shape as it is added (so
// invalid parameters fail here, with the loader's messages), and serialises with FlatBufferBuilder.
// The output is deterministic (same calls, same bytes), weight data is 64-byte aligned within the file,
// metadata is sorted by key, and save() replaces the target atomically (temporary, fsync, rename).
#include "infer/model_builder.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <system_error>

#include "engine/ops/op_util.h"
#include "half.h"
#include "infer/error.h"
#include "infer/model.h"
#include "infer/version.h"
#include "model_generated.h"
#include "shape_inference.h"

namespace infer {

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 40;
constexpr size_t kMaxRank = 8;
// Leave room for everything but the weights under FlatBuffers' 2 GiB limit.
constexpr uint64_t kMaxWeightBytes = (uint64_t(1) << 31) - (uint64_t(64) << 20);

struct TensorRecord {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  bool constant = false;
  bool folded = false;        // a constant the loader computes (a foldable node of constants only)
  bool produced = false;      // the output of some node
  std::vector<uint8_t> bytes;  // constants: the stored little-endian data
};

struct NodeRecord {
  std::string name;
  OpParams params;
  std::vector<int> inputs;
  int output = -1;
};

// Checks a declared shape: rank 1..8, leading dim -1 (batch, if allowed) or >= 1, others >= 1, and at
// most 2^40 elements. Returns the element count without the batch dim.
int64_t check_shape(const std::string& what, const Shape& s, bool allow_batch) {
  if (s.empty() || s.size() > kMaxRank)
    throw Error(what + ": shape must have rank 1 to " + std::to_string(kMaxRank) + " (got " +
                std::to_string(s.size()) + ")");
  int64_t n = 1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (d == 0 && allow_batch && s[d] == -1) continue;
    if (s[d] < 1)
      throw Error(what + ": shape " + shape_str(s) + " has dimension " + std::to_string(s[d]) +
                  (allow_batch ? " (dims must be > 0; only the leading one may be -1)"
                               : " (dims must be > 0)"));
    if (s[d] > kMaxElements / n)
      throw Error(what + ": shape " + shape_str(s) + " has more than 2^40 elements");
    n *= s[d];
  }
  return n;
}

std::string sys_error(int err) { return std::generic_category().message(err); }

// A constant's stored values as floats (what the loader widens them to).
std::vector<float> stored_values(const TensorRecord& t) {
  const size_t n = t.bytes.size() / dtype_size(t.dtype);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::F32: std::memcpy(&v[i], &t.bytes[4 * i], 4); break;
      case DType::F16:
        v[i] = detail::half_to_float(static_cast<uint16_t>(t.bytes[2 * i] | (t.bytes[2 * i + 1] << 8)));
        break;
      case DType::I8: v[i] = static_cast<float>(static_cast<int8_t>(t.bytes[i])); break;
      case DType::U8: v[i] = static_cast<float>(t.bytes[i]); break;
      case DType::I32: {
        int32_t q;
        std::memcpy(&q, &t.bytes[4 * i], 4);
        v[i] = static_cast<float>(q);
        break;
      }
    }
  }
  return v;
}

}  // namespace

struct ModelBuilder::Impl {
  std::string name, description, producer;
  std::map<std::string, std::string> metadata;
  std::vector<TensorRecord> tensors;
  std::vector<NodeRecord> nodes;
  std::vector<int> inputs, outputs;
  std::set<std::string> names;       // tensor names
  std::set<std::string> node_names;
  uint64_t weight_bytes = 0;

  void claim_name(const std::string& tensor_name) {
    if (tensor_name.empty()) throw Error("model builder: a tensor name must not be empty");
    if (!names.insert(tensor_name).second)
      throw Error("model builder: tensor name '" + tensor_name + "' is already used");
  }

  const TensorRecord& tensor(int id, const std::string& what) const {
    if (id < 0 || static_cast<size_t>(id) >= tensors.size())
      throw Error("model builder: " + what + " is tensor id " + std::to_string(id) +
                  ", which does not exist");
    return tensors[static_cast<size_t>(id)];
  }
};

ModelBuilder::ModelBuilder(std::string name) : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(name);
  impl_->producer = std::string("infer ") + version();
}
ModelBuilder::~ModelBuilder() = default;
ModelBuilder::ModelBuilder(ModelBuilder&&) noexcept = default;
ModelBuilder& ModelBuilder::operator=(ModelBuilder&&) noexcept = default;

void ModelBuilder::set_description(std::string text) { impl_->description = std::move(text); }
void ModelBuilder::set_producer(std::string text) { impl_->producer = std::move(text); }
void ModelBuilder::set_metadata(const std::string& key, std::string value) {
  impl_->metadata[key] = std::move(value);
}

int ModelBuilder::input(const std::string& name, Shape shape) {
  check_shape("model builder: input '" + name + "'", shape, true);
  impl_->claim_name(name);
  TensorRecord t;
  t.name = name;
  t.shape = std::move(shape);
  impl_->tensors.push_back(std::move(t));
  const int id = static_cast<int>(impl_->tensors.size()) - 1;
  impl_->inputs.push_back(id);
  return id;
}

int ModelBuilder::constant(const std::string& name, Shape shape, const std::vector<float>& data,
                           DType dtype) {
  const std::string what = "model builder: constant '" + name + "'";
  const int64_t n = check_shape(what, shape, false);
  if (static_cast<uint64_t>(n) != data.size())
    throw Error(what + ": data has " + std::to_string(data.size()) + " floats but shape " +
                shape_str(shape) + " needs " + std::to_string(n));
  if (static_cast<int>(dtype) > static_cast<int>(DType::I32))
    throw Error(what + ": unknown dtype " + std::to_string(static_cast<int>(dtype)));
  if (!is_float_dtype(dtype)) {  // integers stored as such: each value must be one, in range
    const double lo = dtype == DType::I8 ? -128.0 : dtype == DType::U8 ? 0.0 : -2147483648.0;
    const double hi = dtype == DType::I8 ? 127.0 : dtype == DType::U8 ? 255.0 : 2147483647.0;
    for (size_t i = 0; i < data.size(); ++i)
      if (!(data[i] >= lo && data[i] <= hi && std::nearbyint(data[i]) == data[i]))
        throw Error(what + ": element " + std::to_string(i) + " (" + std::to_string(data[i]) + ") is not a " +
                    dtype_name(dtype) + " value");
  }
  const uint64_t bytes = static_cast<uint64_t>(n) * dtype_size(dtype);
  if (impl_->weight_bytes + bytes > kMaxWeightBytes)
    throw Error(what + ": the model's weights would exceed the format's 2 GiB limit");
  impl_->claim_name(name);

  TensorRecord t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.constant = true;
  t.bytes.resize(static_cast<size_t>(bytes));
  if (dtype == DType::F32) {
    std::memcpy(t.bytes.data(), data.data(), t.bytes.size());  // little-endian host (as the loader)
  } else if (dtype == DType::I8 || dtype == DType::U8) {
    for (size_t i = 0; i < data.size(); ++i)
      t.bytes[i] = static_cast<uint8_t>(static_cast<int32_t>(data[i]) & 0xff);
  } else if (dtype == DType::I32) {
    for (size_t i = 0; i < data.size(); ++i) {
      const int32_t q = static_cast<int32_t>(data[i]);
      std::memcpy(&t.bytes[4 * i], &q, 4);
    }
  } else {
    for (size_t i = 0; i < data.size(); ++i) {
      const uint16_t h = detail::float_to_half(data[i]);
      t.bytes[2 * i] = static_cast<uint8_t>(h & 0xff);
      t.bytes[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
  }
  impl_->weight_bytes += bytes;
  impl_->tensors.push_back(std::move(t));
  return static_cast<int>(impl_->tensors.size()) - 1;
}

int ModelBuilder::node(const std::string& name, OpParams params, std::vector<int> inputs,
                       const std::string& output_name) {
  const OpType op = op_type(params);
  const std::string where = "model builder: node '" + name + "' (" + op_name(op) + ")";
  if (static_cast<int>(op) >= kNumFileOpTypes)
    throw Error(where + ": an engine-internal op (made by a graph pass); it has no file form");
  // Shapes with a leading -1 are inferred at batch 1; the output then gets the -1 back.
  const bool foldable = detail::op_def(op).inputs == detail::InputKinds::FoldableThenParams;
  std::vector<Shape> shapes;
  std::vector<bool> constant;
  std::vector<DType> dtypes;
  bool batched = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorRecord& t = impl_->tensor(inputs[i], where + ": input " + std::to_string(i));
    const bool parameter = detail::is_parameter_input(op, i);
    if (parameter && !t.constant)
      throw Error(where + ": input " + std::to_string(i) + " '" + t.name +
                  "' is an activation; it must be a constant");
    if (!parameter && t.constant && !detail::any_input_kind(op) && !foldable)
      throw Error(where + ": input " + std::to_string(i) + " '" + t.name +
                  "' is a constant; it must be an activation");
    Shape s = t.shape;
    if (!s.empty() && s[0] == -1) {
      s[0] = 1;
      batched = true;
    }
    shapes.push_back(std::move(s));
    constant.push_back(t.constant);
    dtypes.push_back(t.dtype);
  }
  const DType out_dtype = detail::node_output_dtype(where, params, dtypes);
  std::vector<Shape> out = detail::infer_node_shapes(params, shapes, where, &constant);
  if (foldable) {  // scale values (finite, > 0) as the loader checks them, from the stored bytes
    std::vector<std::vector<float>> held(inputs.size());
    std::vector<const float*> data(inputs.size(), nullptr);
    for (size_t i = 1; i < inputs.size(); ++i) {
      const TensorRecord& t = impl_->tensors[static_cast<size_t>(inputs[i])];
      if (t.folded || !t.constant) continue;
      held[i] = stored_values(t);
      data[i] = held[i].data();
    }
    detail::check_quant_constants(where, params, dtypes, data, shapes);
  }
  const bool folds = foldable && constant[0];  // the loader evaluates it: its output is a constant
  if (out.size() != 1) throw Error(where + ": expected one output");
  if (batched) out[0][0] = -1;  // every op keeps the batch as dim 0
  check_shape(where + ": output", out[0], true);
  if (name.empty()) throw Error("model builder: a node name must not be empty");
  if (impl_->node_names.count(name)) throw Error("model builder: node name '" + name + "' is already used");
  const std::string& tensor_name = output_name.empty() ? name : output_name;
  impl_->claim_name(tensor_name);
  impl_->node_names.insert(name);

  TensorRecord t;
  t.name = tensor_name;
  t.shape = std::move(out[0]);
  t.dtype = out_dtype;
  t.produced = !folds;
  t.constant = t.folded = folds;
  impl_->tensors.push_back(std::move(t));
  const int id = static_cast<int>(impl_->tensors.size()) - 1;
  impl_->nodes.push_back(NodeRecord{name, std::move(params), std::move(inputs), id});
  return id;
}

void ModelBuilder::output(int tensor) {
  const TensorRecord& t = impl_->tensor(tensor, "output");
  if (!t.produced)
    throw Error("model builder: output '" + t.name + "' is not produced by any node" +
                (t.folded ? " (it is folded at load: its inputs are constants)" : ""));
  for (int o : impl_->outputs)
    if (o == tensor) throw Error("model builder: output '" + t.name + "' is listed twice");
  impl_->outputs.push_back(tensor);
}

const Shape& ModelBuilder::shape(int tensor) const { return impl_->tensor(tensor, "shape()").shape; }

std::vector<uint8_t> ModelBuilder::finish() const {
  const Impl& m = *impl_;
  if (m.inputs.empty()) throw Error("model builder: model '" + m.name + "' has no inputs");
  if (m.outputs.empty()) throw Error("model builder: model '" + m.name + "' has no outputs");

  flatbuffers::FlatBufferBuilder fbb(static_cast<size_t>(m.weight_bytes) + 4096);

  // Buffers: [0] is the empty sentinel, then one per constant, each 64-byte aligned in the file.
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  buffers.push_back(fb::CreateBuffer(fbb));
  std::vector<uint32_t> buffer_of(m.tensors.size(), 0);
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorRecord& t = m.tensors[i];
    if (!t.constant || t.folded) continue;
    // What ForceVectorAlignment(n, 1, 64) does, minus its assert that alignment <=
    // FLATBUFFERS_MAX_ALIGNMENT (32 in flatbuffers 2.0.8): the schema's force_align is 64.
    fbb.PreAlign(t.bytes.size(), 64);
    const auto data = fbb.CreateVector(t.bytes);
    buffer_of[i] = static_cast<uint32_t>(buffers.size());
    buffers.push_back(fb::CreateBuffer(fbb, data));
  }

  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorRecord& t = m.tensors[i];
    tensors.push_back(fb::CreateTensorDirect(fbb, t.name.c_str(), &t.shape,
                                             static_cast<fb::DType>(t.dtype), buffer_of[i]));
  }

  std::vector<flatbuffers::Offset<fb::Node>> nodes;
  for (const NodeRecord& n : m.nodes) {
    const auto name = fbb.CreateString(n.name);
    std::vector<uint32_t> ins(n.inputs.begin(), n.inputs.end());
    const auto inputs = fbb.CreateVector(ins);
    const auto outputs = fbb.CreateVector(std::vector<uint32_t>{static_cast<uint32_t>(n.output)});
    // node() admits only ops with a file form (OpType below kNumFileOpTypes): each has a write.
    const auto options = detail::op_def(op_type(n.params)).write(fbb, n.params);
    nodes.push_back(fb::CreateNode(fbb, name, inputs, outputs, options.first, options.second));
  }

  std::vector<flatbuffers::Offset<fb::KeyValue>> metadata;
  for (const auto& kv : m.metadata)
    metadata.push_back(fb::CreateKeyValueDirect(fbb, kv.first.c_str(), kv.second.c_str()));

  const std::vector<uint32_t> inputs(m.inputs.begin(), m.inputs.end());
  const std::vector<uint32_t> outputs(m.outputs.begin(), m.outputs.end());
  // One statement per object: argument evaluation order is unspecified, the byte order must not be.
  const auto name = fbb.CreateString(m.name);
  const auto description = fbb.CreateString(m.description);
  const auto producer = fbb.CreateString(m.producer);
  const auto tensor_vec = fbb.CreateVector(tensors);
  const auto node_vec = fbb.CreateVector(nodes);
  const auto input_vec = fbb.CreateVector(inputs);
  const auto output_vec = fbb.CreateVector(outputs);
  const auto buffer_vec = fbb.CreateVector(buffers);
  const auto metadata_vec = fbb.CreateVectorOfSortedTables(&metadata);
  const auto root = fb::CreateModel(fbb, kFormatVersion, name, description, producer, tensor_vec,
                                    node_vec, input_vec, output_vec, buffer_vec, metadata_vec);
  fb::FinishModelBuffer(fbb, root);
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

void ModelBuilder::save(const std::string& path) const {
  const std::vector<uint8_t> bytes = finish();
  // A temporary of its own per process and call (two writers never share one), on disk (fsync)
  // before the rename makes it visible: a crash leaves the old file or the new one.
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(path + ": cannot write: " + sys_error(errno));
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  int err = written == bytes.size() ? 0 : (errno ? errno : EIO);
  if (err == 0 && (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)) err = errno ? errno : EIO;
  if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write: " + sys_error(err));
  }
}

}  // namespace infer
