// The model loader: identifier and size checks, the FlatBuffers verifier, the format version, then the
// semantic validation that makes every later stage safe (indices in range, buffers exactly sized,
// dims positive and bounded, op options present and known, nodes in topological order, declared shapes
// equal to inferred ones at batch 1). f32 weights stay in the caller's memory (the mmap); f16 weights
// are widened once into Graph::storage. Every failure is an infer::Error "<origin>: <what>".
#include "loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <system_error>

#include "engine/ops/op_util.h"
#include "half.h"
#include "infer/error.h"
#include "model_generated.h"
#include "shape_inference.h"

namespace infer::detail {

static_assert(FLATBUFFERS_LITTLEENDIAN, "weights are read in place as little-endian floats");
static_assert(static_cast<int>(fb::Op::MAX) == kNumFileOpTypes,
              "schema/model.fbs's Op union and infer/ops.h's file ops disagree");

namespace {

// Resource limits (docs/format.md "Limits"): a small file must not describe a graph whose validation,
// planning or arena takes minutes or gigabytes. The session's memory check (memory_budget.h) is the
// bound on what is allocated; these keep every loop and size product of the loader small.
constexpr int64_t kMaxElements = int64_t(1) << 31;  // per tensor, batch excluded (8 GiB of float32)
constexpr size_t kMaxTensors = 1'000'000;
constexpr size_t kMaxNodes = 100'000;
constexpr size_t kMaxNodeInputs = 1'024;
constexpr size_t kMaxMetadata = 10'000;
// FlatBuffers offsets are 32-bit signed; the verifier asserts on larger buffers.
constexpr size_t kMaxFileBytes = FLATBUFFERS_MAX_BUFFER_SIZE - 1;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string str_or_empty(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

class Loader {
 public:
  Loader(const fb::Model& m, const std::string& origin) : m_(m), origin_(origin) {}

  std::shared_ptr<Graph> run(std::shared_ptr<const void> keep);

 private:
  const fb::Model& m_;
  const std::string& origin_;
  std::shared_ptr<Graph> g_;
  size_t num_tensors_ = 0;
  std::vector<bool> is_constant_, is_input_, folded_;  // folded_: a constant a node became at load
  std::vector<int> producer_;  // node index producing each tensor, -1 if none (yet)

  [[noreturn]] void fail(const std::string& what) const { throw Error(origin_ + ": " + what); }

  const fb::Tensor* tensor(size_t i) const { return m_.tensors()->Get(static_cast<flatbuffers::uoffset_t>(i)); }

  std::string tensor_label(size_t i) const {
    const std::string name = str_or_empty(tensor(i)->name());
    return "tensor " + std::to_string(i) + (name.empty() ? "" : " " + quoted(name));
  }

  std::string node_label(size_t k) const {
    const fb::Node* n = m_.nodes()->Get(static_cast<flatbuffers::uoffset_t>(k));
    const std::string name = str_or_empty(n->name());
    return "node " + std::to_string(k) + (name.empty() ? "" : " " + quoted(name));
  }

  // "tensor index i of something" -> checked index.
  size_t tensor_index(uint32_t index, const std::string& what) const {
    if (index >= num_tensors_)
      fail(what + " is tensor " + std::to_string(index) + " but the model has " +
           std::to_string(num_tensors_) + " tensors");
    return index;
  }

  void read_header();
  void read_metadata();
  void read_tensors(const std::shared_ptr<const void>& keep);
  void read_inputs();
  void read_nodes();
  void read_outputs();
  void fold(const Node& node, const std::string& where, const std::string& label);
};

// ---- the steps -----------------------------------------------------------------------------------

void Loader::read_header() {
  g_->format_version = m_.format_version();
  g_->name = str_or_empty(m_.name());
  g_->description = str_or_empty(m_.description());
  g_->producer = str_or_empty(m_.producer());
}

void Loader::read_metadata() {
  if (!m_.metadata()) return;
  if (m_.metadata()->size() > kMaxMetadata)
    fail("field metadata has " + std::to_string(m_.metadata()->size()) + " entries (at most " +
         std::to_string(kMaxMetadata) + ")");
  for (const fb::KeyValue* kv : *m_.metadata()) {
    const std::string key = str_or_empty(kv->key());
    if (!g_->metadata.emplace(key, str_or_empty(kv->value())).second)
      fail("metadata key " + quoted(key) + " appears twice");
  }
}

void Loader::read_tensors(const std::shared_ptr<const void>& keep) {
  const auto* buffers = m_.buffers();
  if (!buffers || buffers->size() == 0)
    fail("field buffers is missing (buffers[0] must be the empty sentinel)");
  const fb::Buffer* sentinel = buffers->Get(0);
  if (sentinel->data() && sentinel->data()->size() != 0)
    fail("buffers[0] must be empty (it is the 'no data' sentinel) but holds " +
         std::to_string(sentinel->data()->size()) + " bytes");

  num_tensors_ = m_.tensors() ? m_.tensors()->size() : 0;
  if (num_tensors_ == 0) fail("model has no tensors");
  if (num_tensors_ > kMaxTensors)
    fail("model has " + std::to_string(num_tensors_) + " tensors (at most " +
         std::to_string(kMaxTensors) + ")");
  is_constant_.assign(num_tensors_, false);
  is_input_.assign(num_tensors_, false);
  folded_.assign(num_tensors_, false);
  producer_.assign(num_tensors_, -1);
  g_->values.resize(num_tensors_);
  std::set<uint32_t> counted_buffers;

  for (size_t i = 0; i < num_tensors_; ++i) {
    const fb::Tensor* t = tensor(i);
    const std::string label = tensor_label(i);
    Value& v = g_->values[i];
    v.name = str_or_empty(t->name());
    if (v.name.empty()) v.name = "tensor " + std::to_string(i);

    if (t->shape()) {
      check_aligned(t->shape(), origin_ + ": " + label + ": field shape");
      if (t->shape()->size() > kMaxRank)
        fail(label + ": field shape has rank " + std::to_string(t->shape()->size()) + " (at most " +
             std::to_string(kMaxRank) + ")");
      v.shape.assign(t->shape()->begin(), t->shape()->end());
    }
    const int dtype = static_cast<int>(t->dtype());
    if (dtype < static_cast<int>(fb::DType::MIN) || dtype > static_cast<int>(fb::DType::MAX))
      fail(label + ": field dtype has unknown value " + std::to_string(dtype));
    v.dtype = static_cast<DType>(dtype);
    const uint32_t b = t->buffer();
    if (b >= buffers->size())
      fail(label + ": field buffer is " + std::to_string(b) + " but the model has " +
           std::to_string(buffers->size()) + " buffers");

    // Dims: activations may have a leading -1 (the batch); everything else must be >= 1, and the
    // element count (batch excluded) must stay below 2^40.
    const bool constant = b != 0;
    if (!constant && v.shape.empty()) fail(label + ": field shape is empty (activations need a batch dim)");
    int64_t n = 1;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      const int64_t dim = v.shape[d];
      if (d == 0 && !constant && dim == -1) continue;
      if (dim < 1)
        fail(label + ": field shape " + shape_str(v.shape) + " has dimension " + std::to_string(dim) +
             (constant ? " (constant dims must be > 0)"
                       : " (dims must be > 0; only the leading one may be -1)"));
      if (dim > kMaxElements / n)
        fail(label + ": field shape " + shape_str(v.shape) + " has more than 2^31 elements");
      n *= dim;
    }
    if (!constant) continue;

    // A constant: its buffer holds exactly numel x dtype size bytes.
    is_constant_[i] = true;
    const auto* data = buffers->Get(b)->data();
    const size_t have = data ? data->size() : 0;
    const uint64_t need = static_cast<uint64_t>(n) * dtype_size(v.dtype);
    if (have != need)
      fail(label + ": buffer " + std::to_string(b) + " holds " + std::to_string(have) +
           " bytes but shape " + shape_str(v.shape) + " in " + dtype_name(v.dtype) + " needs " +
           std::to_string(need));
    if (counted_buffers.insert(b).second) g_->weight_bytes += need;

    const uint8_t* bytes = data->Data();
    if (v.dtype == DType::F32) {
      if (reinterpret_cast<uintptr_t>(bytes) % alignof(float) == 0) {
        v.data = reinterpret_cast<const float*>(bytes);  // in place: `keep` holds the file
      } else {
        auto copy = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
        std::memcpy(copy->data(), bytes, static_cast<size_t>(need));
        v.data = copy->data();
        g_->storage.push_back(std::move(copy));
      }
    } else {
      auto wide = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
      for (size_t e = 0; e < static_cast<size_t>(n); ++e) {
        switch (v.dtype) {
          case DType::F16:
            (*wide)[e] = half_to_float(static_cast<uint16_t>(bytes[2 * e] | (bytes[2 * e + 1] << 8)));
            break;
          case DType::I8: (*wide)[e] = static_cast<float>(static_cast<int8_t>(bytes[e])); break;
          case DType::U8: (*wide)[e] = static_cast<float>(bytes[e]); break;
          default: {  // I32, little-endian
            int32_t q;
            std::memcpy(&q, bytes + 4 * e, 4);
            (*wide)[e] = static_cast<float>(q);
          }
        }
      }
      if (!is_float_dtype(v.dtype)) v.raw = bytes;
      v.data = wide->data();
      g_->storage.push_back(std::move(wide));
    }
  }
  g_->storage.push_back(keep);
}

void Loader::read_inputs() {
  const auto* inputs = m_.inputs();
  if (!inputs || inputs->size() == 0) fail("model has no inputs");
  for (flatbuffers::uoffset_t k = 0; k < inputs->size(); ++k) {
    const std::string what = "inputs[" + std::to_string(k) + "]";
    const size_t i = tensor_index(inputs->Get(k), what);
    if (is_constant_[i])
      fail(what + " is " + tensor_label(i) + ", a constant (model inputs must be activations)");
    if (is_input_[i]) fail(what + " is " + tensor_label(i) + ", listed twice");
    is_input_[i] = true;
    g_->inputs.push_back(static_cast<int>(i));
  }
}

void Loader::read_nodes() {
  const auto* nodes = m_.nodes();
  if (!nodes || nodes->size() == 0) fail("model has no nodes");
  if (nodes->size() > kMaxNodes)
    fail("model has " + std::to_string(nodes->size()) + " nodes (at most " + std::to_string(kMaxNodes) +
         ")");
  for (size_t k = 0; k < nodes->size(); ++k) {
    const fb::Node* fn = nodes->Get(static_cast<flatbuffers::uoffset_t>(k));
    std::string where = origin_ + ": " + node_label(k);
    const int type = static_cast<int>(fn->options_type());
    if (type == static_cast<int>(fb::Op::NONE)) throw Error(where + ": options are missing");
    if (type > static_cast<int>(fb::Op::MAX))
      throw Error(where + ": options have unknown type " + std::to_string(type));
    if (!fn->options()) throw Error(where + ": options are missing");
    // fb::Op is OpType + 1 (NONE comes first in the union).
    const OpType op = static_cast<OpType>(type - 1);
    where += std::string(" (") + op_name(op) + ")";

    Node node;
    node.name = str_or_empty(fn->name());
    if (node.name.empty()) node.name = "node " + std::to_string(k);
    node.params = op_def(op).read(*fn, where);  // every op a file can hold has a read

    const bool foldable = op_def(op).inputs == InputKinds::FoldableThenParams;
    const auto* ins = fn->inputs();
    const size_t num_inputs = ins ? ins->size() : 0;
    if (num_inputs > kMaxNodeInputs)
      throw Error(where + ": has " + std::to_string(num_inputs) + " inputs (at most " +
                  std::to_string(kMaxNodeInputs) + ")");
    for (size_t i = 0; i < num_inputs; ++i) {
      const bool parameter = is_parameter_input(op, i);
      const std::string what = where + ": input " + std::to_string(i) +
                               (parameter ? std::string(" (") + (input_role(op, i) ? input_role(op, i) : "extra") + ")"
                                          : "");
      const uint32_t index = ins->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (index >= num_tensors_)
        throw Error(what + " is tensor " + std::to_string(index) + " but the model has " +
                    std::to_string(num_tensors_) + " tensors");
      const std::string label = tensor_label(index);
      if (parameter && !is_constant_[index])
        throw Error(what + " is " + label + ", an activation; it must be a constant");
      if (!parameter && is_constant_[index] && !any_input_kind(op) && !foldable)
        throw Error(what + " is " + label + ", a constant; it must be an activation");
      if (!is_constant_[index] && !is_input_[index] && producer_[index] < 0) {
        // Find out why, for the message: produced by a later node (or this one), or by none.
        for (size_t later = k; later < nodes->size(); ++later) {
          const auto* outs = nodes->Get(static_cast<flatbuffers::uoffset_t>(later))->outputs();
          if (!outs) continue;
          for (uint32_t o : *outs) {
            if (o != index) continue;
            if (later == k) throw Error(what + " is " + label + ", the node's own output");
            throw Error(what + " is " + label + ", which is produced later (by " +
                        node_label(later) + "): nodes must be in execution order");
          }
        }
        throw Error(what + " is " + label + ", which no node produces and is not a model input");
      }
      node.inputs.push_back(static_cast<int>(index));
    }
    if (any_input_kind(op)) {
      bool activation = false;
      for (int id : node.inputs) activation = activation || !is_constant_[static_cast<size_t>(id)];
      if (!activation && num_inputs > 0)
        throw Error(where + ": every input is a constant (at least one must be an activation)");
    }

    const auto* outs = fn->outputs();
    const size_t num_outputs = outs ? outs->size() : 0;
    if (num_outputs != 1)
      throw Error(where + ": has " + std::to_string(num_outputs) + " outputs (" + op_name(op) +
                  " has exactly 1)");
    const std::string what = where + ": output 0";
    const uint32_t index = outs->Get(0);
    if (index >= num_tensors_)
      throw Error(what + " is tensor " + std::to_string(index) + " but the model has " +
                  std::to_string(num_tensors_) + " tensors");
    const std::string label = tensor_label(index);
    if (is_constant_[index]) throw Error(what + " is " + label + ", a constant");
    if (is_input_[index]) throw Error(what + " is " + label + ", a model input");
    if (producer_[index] >= 0)
      throw Error(what + ": " + label + " is produced twice (by " +
                  node_label(static_cast<size_t>(producer_[index])) + " and " + node_label(k) + ")");
    // Element types: only quantize_linear / dequantize_linear see integer tensors; a float output
    // may be declared f32 or f16 (activations run in the backend's precision either way).
    std::vector<DType> dtypes;
    for (int id : node.inputs) dtypes.push_back(g_->values[static_cast<size_t>(id)].dtype);
    const DType out_dtype = node_output_dtype(where, node.params, dtypes);
    Value& out = g_->values[index];
    if (out.dtype != out_dtype && !(is_float_dtype(out.dtype) && is_float_dtype(out_dtype)))
      throw Error(what + ": " + label + " is declared " + dtype_name(out.dtype) + " but " + op_name(op) +
                  " makes " + dtype_name(out_dtype));
    std::vector<const float*> data;
    std::vector<Shape> shapes;
    for (int id : node.inputs) {
      data.push_back(g_->values[static_cast<size_t>(id)].data);
      shapes.push_back(g_->values[static_cast<size_t>(id)].shape);
    }
    check_quant_constants(where, node.params, dtypes, data, shapes);
    node.outputs.push_back(static_cast<int>(index));
    if (foldable && num_inputs > 0 && is_constant_[static_cast<size_t>(node.inputs[0])]) {
      fold(node, where, label);  // the node becomes its output, a constant
      continue;
    }
    producer_[index] = static_cast<int>(k);
    g_->nodes.push_back(std::move(node));
  }
}

// A quantize_linear / dequantize_linear node of constants only, evaluated now by its reference kernel:
// the output value becomes a constant (f32 for dequantize_linear, with Value::dequantized naming its
// source; integers in float for quantize_linear) that later nodes may take as a weight or bias. Its
// declared shape is the computed one exactly (a constant has no batch).
void Loader::fold(const Node& node, const std::string& where, const std::string& label) {
  std::vector<Shape> shapes;
  std::vector<bool> constant;
  std::vector<const float*> data;
  for (int id : node.inputs) {
    shapes.push_back(g_->values[static_cast<size_t>(id)].shape);
    constant.push_back(true);
    data.push_back(g_->values[static_cast<size_t>(id)].data);
  }
  const std::vector<Shape> out_shapes = infer_node_shapes(node.params, shapes, where, &constant);
  const size_t index = static_cast<size_t>(node.outputs[0]);
  Value& out = g_->values[index];
  if (out.shape != out_shapes[0])
    throw Error(where + ": output 0: " + label + " is declared " + shape_str(out.shape) + " but the node folds "
                "(its input 0 is a constant) to " + shape_str(out_shapes[0]));
  auto result = std::make_shared<std::vector<float>>(static_cast<size_t>(shape_numel(out_shapes[0])));
  NodeDesc desc;
  desc.params = node.params;
  desc.input_shapes = shapes;
  desc.output_shapes = out_shapes;
  desc.constants = data;
  const KernelCall call{desc, data, {result->data()}};
  op_def(node.op()).reference(call);
  out.data = result->data();
  g_->storage.push_back(std::move(result));
  is_constant_[index] = true;
  folded_[index] = true;
  if (node.op() == OpType::DequantizeLinear)
    out.dequantized = Value::Dequantized{node.inputs[0], node.inputs[1], node.inputs.size() > 2 ? node.inputs[2] : -1,
                                         std::get<DequantizeLinearParams>(node.params).axis};
}

void Loader::read_outputs() {
  const auto* outputs = m_.outputs();
  if (!outputs || outputs->size() == 0) fail("model has no outputs");
  std::vector<bool> seen(num_tensors_, false);
  for (flatbuffers::uoffset_t k = 0; k < outputs->size(); ++k) {
    const std::string what = "outputs[" + std::to_string(k) + "]";
    const size_t i = tensor_index(outputs->Get(k), what);
    if (producer_[i] < 0)
      fail(what + " is " + tensor_label(i) + (folded_[i] ? ", a constant (a node of constants only, folded at load)"
                                                         : ", which no node produces"));
    if (seen[i]) fail(what + " is " + tensor_label(i) + ", listed twice");
    seen[i] = true;
    g_->outputs.push_back(static_cast<int>(i));
  }
}

std::shared_ptr<Graph> Loader::run(std::shared_ptr<const void> keep) {
  g_ = std::make_shared<Graph>();
  g_->origin = origin_;
  read_header();
  read_metadata();
  read_tensors(keep);
  read_inputs();
  read_nodes();
  read_outputs();
  for (int i : g_->inputs) {
    const Value& v = g_->values[static_cast<size_t>(i)];
    g_->input_infos.push_back(TensorInfo{v.name, v.shape, v.dtype});
  }
  for (int i : g_->outputs) {
    const Value& v = g_->values[static_cast<size_t>(i)];
    g_->output_infos.push_back(TensorInfo{v.name, v.shape, v.dtype});
  }
  infer_shapes(*g_, 1);  // throws naming the node whose declared output disagrees
  return g_;
}

std::string sys_error(int err) { return std::generic_category().message(err); }

}  // namespace

std::shared_ptr<Graph> load_graph(std::shared_ptr<const void> keep, const uint8_t* data, size_t size,
                                  const std::string& origin) {
  auto fail = [&origin](const std::string& what) { throw Error(origin + ": " + what); };
  if (!data || size == 0) fail("file is empty");
  if (size < 8) fail("file is too small to be an infer model (" + std::to_string(size) + " bytes)");
  if (!fb::ModelBufferHasIdentifier(data)) fail("not an infer model (file identifier is not INFR)");
  if (size > kMaxFileBytes)
    fail("file is too large (" + std::to_string(size) + " bytes; the format's limit is 2 GiB)");

  // FlatBuffers reads scalars in place; 8 bytes (the widest scalar) of alignment keeps that defined.
  if (reinterpret_cast<uintptr_t>(data) % 8 != 0) {
    auto copy = std::make_shared<std::vector<uint64_t>>((size + 7) / 8);
    std::memcpy(copy->data(), data, size);
    data = reinterpret_cast<const uint8_t*>(copy->data());
    keep = std::move(copy);
  }

  flatbuffers::Verifier::Options options;
  options.max_depth = 64;
  options.max_tables = 10'000'000;
  options.check_alignment = true;
  flatbuffers::Verifier verifier(data, size, options);
  if (!fb::VerifyModelBuffer(verifier)) fail("the file is corrupt (FlatBuffers verification failed)");

  const fb::Model* model = fb::GetModel(data);
  const uint32_t version = model->format_version();
  if (version == 0) fail("format_version is 0 or missing (this build reads 1 to " +
                         std::to_string(kFormatVersion) + ")");
  if (version > kFormatVersion)
    fail("format_version " + std::to_string(version) + " is newer than this build supports (" +
         std::to_string(kFormatVersion) + ")");

  return Loader(*model, origin).run(std::move(keep));
}

std::shared_ptr<Graph> load_graph_file(const std::string& path) {
  auto fail = [&path](const std::string& what) { throw Error(path + ": " + what); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open: " + sys_error(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat: " + sys_error(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail("cannot read: " + sys_error(EISDIR));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("cannot read: not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    fail("file is empty");
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  if (addr == MAP_FAILED) fail("cannot map: " + sys_error(err));
  std::shared_ptr<const void> mapping(addr, [size](const void* p) {
    ::munmap(const_cast<void*>(p), size);
  });
  return load_graph(std::move(mapping), static_cast<const uint8_t*>(addr), size, path);
}

}  // namespace infer::detail
