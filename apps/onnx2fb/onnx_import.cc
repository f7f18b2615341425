// ONNX -> infer importer (onnx_import.h). One pass over the nodes in graph order, after a first pass
// that rejects every unsupported op type at once. Values are either activations (builder tensor ids)
// or constants held here; constant-only subgraphs (the Shape/Gather/Unsqueeze/Concat chains that
// exporters emit for Reshape targets) are folded on the fly, with the batch dimension carried as a
// sentinel so that a shape computed from it stays "the batch". Weights reach the builder only when a
// real op consumes them, already in infer's layout (Gemm/MatMul transposed and scaled).
#include "onnx_import.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <onnx/onnx_pb.h>

#include "infer/error.h"

namespace infer::onnx_import {
namespace {

namespace fs = std::filesystem;

// Largest constant or shape product accepted (elements); keeps every byte count far below overflow and
// within the format's 2 GiB limit.
constexpr int64_t kMaxElements = int64_t{1} << 29;
// Largest kernel / stride / padding value accepted before conversion to int.
constexpr int64_t kMaxParam = int64_t{1} << 20;
// The batch dimension inside folded integer shape tensors. Never a real dim (those are >= 0 or -1).
constexpr int64_t kBatch = std::numeric_limits<int64_t>::min() + 7;
// ONNX files are parsed from one buffer; protobuf takes an int size.
constexpr uint64_t kMaxFileBytes = (uint64_t{1} << 31) - 1;

// A constant known at import time: float data (weights) or int64 data (shapes, indices, axes).
struct Const {
  bool is_int = false;
  int type = 0;  // the ONNX element type of integer data (INT8, UINT8, INT32, INT64); 0 for float
  Shape dims;  // empty = scalar
  std::vector<float> f;
  std::vector<int64_t> i;
  int64_t numel() const { return is_int ? static_cast<int64_t>(i.size()) : static_cast<int64_t>(f.size()); }
};

// What an ONNX value name stands for.
struct Val {
  int id = -1;                         // builder tensor id when an activation
  std::shared_ptr<const Const> c;      // when a constant
  std::string const_name;              // the ONNX name of a constant (for builder names)
  bool is_const() const { return c != nullptr; }
};

std::string str_dims(const Shape& s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? "," : "") + std::to_string(s[k]);
  return out + "]";
}

// Product of dims, each >= 0, refusing more than kMaxElements.
int64_t checked_numel(const Shape& dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw Error(what + ": negative dimension in " + str_dims(dims));
    if (d != 0 && n > kMaxElements / d)
      throw Error(what + ": shape " + str_dims(dims) + " has more than 2^29 elements");
    n *= d;
  }
  return n;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);  // subnormal (or zero)
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Thrown (and caught in import_impl) when the exported batch cannot be told apart from a number.
struct PinBatch {
  std::string reason;
};

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string origin, std::string base_dir,
           const ImportOptions& options, std::string default_name, std::string pinned = "")
      : m_(model), origin_(std::move(origin)), base_dir_(std::move(base_dir)), opt_(options),
        b_(pick_name(options, default_name, model)), pinned_(std::move(pinned)) {}

  ModelBuilder run() {
    check_opset();
    count_consumers();
    find_gates();
    check_supported();
    set_header();
    if (!pinned_.empty()) b_.set_metadata("batch.fixed", pinned_);
    const onnx::GraphProto& g = m_.graph();
    for (const onnx::TensorProto& t : g.initializer())
      define(t.name(), constant(decode(t, "initializer '" + t.name() + "'"), t.name()));
    add_inputs();
    for (int k = 0; k < g.node_size(); ++k) {
      if (skip_.count(k)) continue;
      convert(k);
    }
    for (const onnx::ValueInfoProto& o : g.output()) {
      const Val& v = lookup(o.name(), "graph output");
      if (v.is_const())
        throw Error(origin_ + ": graph output '" + o.name() + "' is a constant (not computed from an input)");
      b_.output(v.id);
    }
    if (g.output_size() == 0) throw Error(origin_ + ": the graph has no outputs");
    return std::move(b_);
  }

 private:
  // ---- model-level checks ----------------------------------------------------------------------

  static std::string pick_name(const ImportOptions& o, const std::string& fallback,
                               const onnx::ModelProto& m) {
    if (!o.name.empty()) return o.name;
    if (!fallback.empty()) return fallback;
    if (!m.graph().name().empty()) return m.graph().name();
    return "model";
  }

  void check_opset() {
    opset_ = -1;
    for (const onnx::OperatorSetIdProto& s : m_.opset_import())
      if (s.domain().empty() || s.domain() == "ai.onnx") opset_ = s.version();
    if (opset_ < 0) throw Error(origin_ + ": no opset_import for the default ONNX domain");
    if (opset_ < 7 || opset_ > 18)
      throw Error(origin_ + ": opset " + std::to_string(opset_) + " is not supported (supported: 7-18)");
  }

  // One error naming every unsupported op type and the nodes that use it.
  void check_supported() {
    std::map<std::string, std::vector<std::string>> bad;
    const onnx::GraphProto& g = m_.graph();
    for (int k = 0; k < g.node_size(); ++k) {
      const onnx::NodeProto& n = g.node(k);
      const bool std_domain = n.domain().empty() || n.domain() == "ai.onnx";
      if (std_domain && converters().count(n.op_type())) continue;
      if (gate_muls_.count(k)) continue;  // x * Sigmoid(x) and the like: one activation (find_gates)
      const std::string type = std_domain ? n.op_type() : n.domain() + "." + n.op_type();
      bad[type].push_back(n.name().empty() ? "#" + std::to_string(k) : n.name());
    }
    if (bad.empty()) return;
    std::string msg = origin_ + ": unsupported ONNX ops: ";
    bool first = true;
    for (const auto& [type, nodes] : bad) {
      msg += (first ? "" : "; ") + type + " (";
      for (size_t k = 0; k < nodes.size(); ++k) msg += (k ? ", " : "") + nodes[k];
      msg += ")";
      first = false;
    }
    throw Error(msg);
  }

  void set_header() {
    std::string producer = "onnx2fb";
    if (!m_.producer_name().empty()) {
      producer += " (from " + m_.producer_name();
      if (!m_.producer_version().empty()) producer += " " + m_.producer_version();
      producer += ", opset " + std::to_string(opset_) + ")";
    }
    b_.set_producer(producer);
    b_.set_description(!m_.doc_string().empty() ? m_.doc_string() : "imported from ONNX by onnx2fb");
    // Metadata passes through byte for byte; --metadata entries come after, so they win.
    for (const onnx::StringStringEntryProto& e : m_.metadata_props()) b_.set_metadata(e.key(), e.value());
    for (const auto& [k, v] : opt_.metadata) b_.set_metadata(k, v);
  }

  void add_inputs() {
    const onnx::GraphProto& g = m_.graph();
    for (const onnx::ValueInfoProto& in : g.input()) {
      if (values_.count(in.name())) continue;  // old exporters list initializers as inputs too
      const std::string what = origin_ + ": input '" + in.name() + "'";
      if (!in.type().has_tensor_type()) throw Error(what + " is not a tensor");
      const onnx::TypeProto::Tensor& tt = in.type().tensor_type();
      if (tt.elem_type() != onnx::TensorProto::FLOAT)
        throw Error(what + " has element type " + std::to_string(tt.elem_type()) +
                    "; only float32 inputs are supported");
      if (!tt.has_shape() || tt.shape().dim_size() < 2)
        throw Error(what + " needs a known shape of rank >= 2 (batch first)");
      Shape shape;
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const onnx::TensorShapeProto::Dimension& dim = tt.shape().dim(d);
        const bool known = dim.has_dim_value();
        if (d == 0) {
          // Symbolic or fixed: the batch. A fixed size is what the exporter traced at; constants
          // computed from it (Reshape targets) are mapped back to the batch where they are used.
          if (known) {
            if (dim.dim_value() < 1 || dim.dim_value() > kMaxElements)
              throw Error(what + ": batch dimension " + std::to_string(dim.dim_value()) + " is invalid");
            if (exported_batch_ > 0 && exported_batch_ != dim.dim_value())
              throw Error(what + " has a fixed batch of " + std::to_string(dim.dim_value()) +
                          " but an earlier input has " + std::to_string(exported_batch_) +
                          "; export every input at one batch");
            exported_batch_ = dim.dim_value();
            exported_batch_from_ = in.name();
          }
          if (!pinned_.empty() && !known)
            throw Error(what + " has a dynamic batch axis but the model is kept at its fixed batch: " + pinned_);
          shape.push_back(pinned_.empty() ? -1 : dim.dim_value());
          continue;
        }
        if (!known || dim.dim_value() < 1 || dim.dim_value() > kMaxElements)
          throw Error(what + ": dimension " + std::to_string(d) + " must be a fixed positive size");
        shape.push_back(dim.dim_value());
      }
      checked_numel(Shape(shape.begin() + 1, shape.end()), what);
      Val v;
      v.id = b_.input(unique(in.name(), "input"), shape);
      define(in.name(), v);
    }
  }

  void count_consumers() {
    const onnx::GraphProto& g = m_.graph();
    for (int k = 0; k < g.node_size(); ++k)
      for (const std::string& in : g.node(k).input())
        if (!in.empty()) consumers_[in].push_back(k);
    for (const onnx::ValueInfoProto& o : g.output()) graph_outputs_.insert(o.name());
  }

  // Exporters write SiLU as Mul(x, Sigmoid(x)) (PyTorch's nn.SiLU below opset 20 has no op of its
  // own) and, below opset 14, Hardswish as Mul(x, HardSigmoid(x; 1/6, 0.5)). A Sigmoid / HardSigmoid
  // whose output feeds only one Mul, whose other input is the gate's own input, becomes one
  // activation node (silu / hard_swish) at the gate; the Mul is skipped. A HardSigmoid with other
  // alpha / beta is not a hard_swish and stays as it is.
  void find_gates() {
    const onnx::GraphProto& g = m_.graph();
    for (int k = 0; k < g.node_size(); ++k) {
      const onnx::NodeProto& n = g.node(k);
      if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
      const bool sig = n.op_type() == "Sigmoid", hsig = n.op_type() == "HardSigmoid";
      if ((!sig && !hsig) || n.input_size() != 1 || n.output_size() != 1 || n.input(0).empty()) continue;
      if (hsig) {
        float alpha = 0.2f, beta = 0.5f;
        for (const onnx::AttributeProto& a : n.attribute()) {
          if (a.name() == "alpha") alpha = a.f();
          if (a.name() == "beta") beta = a.f();
        }
        if (std::fabs(alpha - 1.f / 6.f) > 1e-6f || beta != 0.5f) continue;
      }
      const std::string& x = n.input(0);
      const std::string& s = n.output(0);
      auto users = consumers_.find(s);
      if (users == consumers_.end() || users->second.size() != 1 || graph_outputs_.count(s)) continue;
      const int m = users->second[0];
      const onnx::NodeProto& mul = g.node(m);
      if (mul.op_type() != "Mul" || (!mul.domain().empty() && mul.domain() != "ai.onnx") ||
          mul.input_size() != 2 || mul.output_size() != 1)
        continue;
      if (!((mul.input(0) == x && mul.input(1) == s) || (mul.input(0) == s && mul.input(1) == x))) continue;
      gates_[k] = {sig ? ActivationKind::Silu : ActivationKind::HardSwish, m};
      gate_muls_.insert(m);
    }
  }

  // ---- values ----------------------------------------------------------------------------------

  void define(const std::string& name, Val v) {
    if (name.empty()) return;
    values_[name] = std::move(v);
  }

  static Val constant(Const c, const std::string& name) {
    Val v;
    v.c = std::make_shared<const Const>(std::move(c));
    v.const_name = name;
    return v;
  }

  const Val& lookup(const std::string& name, const std::string& what) {
    auto it = values_.find(name);
    if (it == values_.end())
      throw Error(origin_ + ": " + what + " '" + name + "' is not defined before it is used");
    return it->second;
  }

  // A name unused so far in the builder (tensor and node names share one namespace).
  std::string unique(const std::string& base, const std::string& fallback) {
    std::string name = base.empty() ? fallback : base;
    std::string candidate = name;
    for (int k = 1; used_.count(candidate); ++k) candidate = name + "_" + std::to_string(k);
    used_.insert(candidate);
    return candidate;
  }

  // ---- tensors ---------------------------------------------------------------------------------

  // Reads `length` bytes at `offset` of an external-data file named by a TensorProto.
  std::string external_bytes(const onnx::TensorProto& t, const std::string& what) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const onnx::StringStringEntryProto& e : t.external_data()) {
      const auto as_int = [&](const std::string& s) {
        int64_t v = 0;
        if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
          throw Error(what + ": external data " + e.key() + " '" + s + "' is not a valid number");
        v = std::stoll(s);
        return v;
      };
      if (e.key() == "location") location = e.value();
      else if (e.key() == "offset") offset = as_int(e.value());
      else if (e.key() == "length") length = as_int(e.value());
    }
    if (location.empty()) throw Error(what + ": external data without a location");
    if (base_dir_.empty()) throw Error(what + ": external data is not allowed for in-memory models");
    const fs::path rel(location);
    if (rel.is_absolute()) throw Error(what + ": external data location '" + location + "' is absolute");
    for (const fs::path& part : rel)
      if (part == "..")
        throw Error(what + ": external data location '" + location + "' leaves the model's folder");
    const fs::path path = fs::path(base_dir_) / rel;
    std::error_code ec;
    const uintmax_t size = fs::file_size(path, ec);
    if (ec) throw Error(what + ": cannot read external data '" + path.string() + "': " + ec.message());
    if (static_cast<uintmax_t>(offset) > size)
      throw Error(what + ": external data offset " + std::to_string(offset) + " is past the end of '" +
                  path.string() + "' (" + std::to_string(size) + " bytes)");
    if (length < 0) length = static_cast<int64_t>(size - static_cast<uintmax_t>(offset));
    if (static_cast<uintmax_t>(length) > size - static_cast<uintmax_t>(offset))
      throw Error(what + ": external data range " + std::to_string(offset) + "+" + std::to_string(length) +
                  " is past the end of '" + path.string() + "' (" + std::to_string(size) + " bytes)");
    if (static_cast<uint64_t>(length) > kMaxFileBytes) throw Error(what + ": external data is too large");
    std::ifstream f(path, std::ios::binary);
    std::string bytes(static_cast<size_t>(length), '\0');
    f.seekg(offset);
    if (!f || !f.read(bytes.data(), length))
      throw Error(what + ": cannot read external data '" + path.string() + "'");
    return bytes;
  }

  // TensorProto -> Const: FLOAT, DOUBLE, FLOAT16 as floats; INT64, INT32 as ints.
  Const decode(const onnx::TensorProto& t, const std::string& what_in) {
    const std::string what = origin_ + ": " + what_in;
    Const c;
    for (int64_t d : t.dims()) c.dims.push_back(d);
    const int64_t n = checked_numel(c.dims, what);
    if (t.has_segment()) throw Error(what + ": segmented tensors are not supported");
    size_t elem = 0;
    switch (t.data_type()) {
      case onnx::TensorProto::FLOAT: elem = 4; break;
      case onnx::TensorProto::DOUBLE: elem = 8; break;
      case onnx::TensorProto::FLOAT16: elem = 2; break;
      case onnx::TensorProto::INT64: elem = 8; c.is_int = true; break;
      case onnx::TensorProto::INT32: elem = 4; c.is_int = true; break;
      case onnx::TensorProto::INT8:
      case onnx::TensorProto::UINT8: elem = 1; c.is_int = true; break;  // quantized data (QDQ)
      case onnx::TensorProto::INT16:
      case onnx::TensorProto::UINT16:
      case 21:  // UINT4
      case 22:  // INT4
      case 17: case 18: case 19: case 20:  // FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ
        throw Error(what + ": element type " + std::to_string(t.data_type()) +
                    " (int16, int4 or float8) is not supported (quantized tensors: int8, uint8; int32 biases)");
      default:
        throw Error(what + ": element type " + std::to_string(t.data_type()) +
                    " is not supported (float32, float64, float16, int32, int64)");
    }
    const size_t count = static_cast<size_t>(n);
    if (c.is_int) c.i.resize(count); else c.f.resize(count);
    if (c.is_int) c.type = t.data_type();

    std::string external;
    const std::string* raw = nullptr;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      external = external_bytes(t, what);
      raw = &external;
    } else if (t.has_raw_data()) {
      raw = &t.raw_data();
    }
    if (raw) {
      if (raw->size() != count * elem)
        throw Error(what + ": has " + std::to_string(raw->size()) + " bytes of data but shape " +
                    str_dims(c.dims) + " needs " + std::to_string(count * elem));
      const char* p = raw->data();
      for (size_t k = 0; k < count; ++k, p += elem) {  // little-endian, as ONNX specifies
        switch (t.data_type()) {
          case onnx::TensorProto::FLOAT: std::memcpy(&c.f[k], p, 4); break;
          case onnx::TensorProto::DOUBLE: { double d; std::memcpy(&d, p, 8); c.f[k] = static_cast<float>(d); break; }
          case onnx::TensorProto::FLOAT16: { uint16_t h; std::memcpy(&h, p, 2); c.f[k] = half_to_float(h); break; }
          case onnx::TensorProto::INT64: std::memcpy(&c.i[k], p, 8); break;
          case onnx::TensorProto::INT8: c.i[k] = static_cast<int8_t>(*p); break;
          case onnx::TensorProto::UINT8: c.i[k] = static_cast<uint8_t>(*p); break;
          default: { int32_t v; std::memcpy(&v, p, 4); c.i[k] = v; break; }
        }
      }
      return c;
    }
    const auto check_count = [&](int have) {
      if (static_cast<size_t>(have) != count)
        throw Error(what + ": has " + std::to_string(have) + " values but shape " + str_dims(c.dims) +
                    " needs " + std::to_string(count));
    };
    switch (t.data_type()) {
      case onnx::TensorProto::FLOAT:
        check_count(t.float_data_size());
        for (size_t k = 0; k < count; ++k) c.f[k] = t.float_data(static_cast<int>(k));
        break;
      case onnx::TensorProto::DOUBLE:
        check_count(t.double_data_size());
        for (size_t k = 0; k < count; ++k) c.f[k] = static_cast<float>(t.double_data(static_cast<int>(k)));
        break;
      case onnx::TensorProto::FLOAT16:  // the 16 bits sit in int32_data
        check_count(t.int32_data_size());
        for (size_t k = 0; k < count; ++k)
          c.f[k] = half_to_float(static_cast<uint16_t>(t.int32_data(static_cast<int>(k))));
        break;
      case onnx::TensorProto::INT64:
        check_count(t.int64_data_size());
        for (size_t k = 0; k < count; ++k) c.i[k] = t.int64_data(static_cast<int>(k));
        break;
      default:
        check_count(t.int32_data_size());
        for (size_t k = 0; k < count; ++k) c.i[k] = t.int32_data(static_cast<int>(k));
        break;
    }
    return c;
  }

  // ---- node helpers ----------------------------------------------------------------------------

  const onnx::NodeProto* n_ = nullptr;  // the node being converted
  int k_ = 0;

  std::string node_label() const {
    return "node '" + (n_->name().empty() ? "#" + std::to_string(k_) : n_->name()) + "' (" +
           n_->op_type() + ")";
  }
  [[noreturn]] void fail(const std::string& msg) const { throw Error(origin_ + ": " + node_label() + ": " + msg); }
  [[noreturn]] void unsupported(const std::string& msg) const {
    throw Error(origin_ + ": " + node_label() + ": unsupported: " + msg);
  }

  const onnx::AttributeProto* attr(const char* name, onnx::AttributeProto::AttributeType type) const {
    for (const onnx::AttributeProto& a : n_->attribute()) {
      if (a.name() != name) continue;
      if (a.type() != type && a.type() != onnx::AttributeProto::UNDEFINED) fail(std::string("attribute ") + name + " has the wrong type");
      return &a;
    }
    return nullptr;
  }
  int64_t attr_int(const char* name, int64_t fallback) const {
    const onnx::AttributeProto* a = attr(name, onnx::AttributeProto::INT);
    return a ? a->i() : fallback;
  }
  float attr_float(const char* name, float fallback) const {
    const onnx::AttributeProto* a = attr(name, onnx::AttributeProto::FLOAT);
    return a ? a->f() : fallback;
  }
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> fallback) const {
    const onnx::AttributeProto* a = attr(name, onnx::AttributeProto::INTS);
    if (!a) return fallback;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  std::string attr_string(const char* name, const std::string& fallback) const {
    const onnx::AttributeProto* a = attr(name, onnx::AttributeProto::STRING);
    return a ? a->s() : fallback;
  }

  bool has_input(int k) const { return k < n_->input_size() && !n_->input(k).empty(); }
  const Val& in(int k) {
    if (!has_input(k)) fail("input " + std::to_string(k) + " is missing");
    return lookup(n_->input(k), node_label() + " input");
  }
  // An activation input: a builder tensor id.
  int act(int k) {
    const Val& v = in(k);
    if (v.is_const())
      unsupported("input " + std::to_string(k) + " '" + n_->input(k) +
                  "' is a constant; only shape computations are folded");
    return v.id;
  }
  // A float constant input (weights).
  const Const& weight(int k) {
    const Val& v = in(k);
    if (!v.is_const()) unsupported("input " + std::to_string(k) + " '" + n_->input(k) + "' must be a constant");
    if (v.c->is_int) fail("input " + std::to_string(k) + " '" + n_->input(k) + "' must be a float tensor");
    return *v.c;
  }
  const Const& ints(int k) {
    const Val& v = in(k);
    if (!v.is_const()) unsupported("input " + std::to_string(k) + " '" + n_->input(k) + "' must be a constant");
    if (!v.c->is_int) fail("input " + std::to_string(k) + " '" + n_->input(k) + "' must be an integer tensor");
    return *v.c;
  }
  int add_weight(int k, Shape shape, std::vector<float> data, const std::string& suffix = "") {
    const std::string base = n_->input(k) + suffix;
    return b_.constant(unique(base, "const"), std::move(shape), data, opt_.weight_dtype);
  }
  int add_weight(int k) {
    const Const& c = weight(k);
    if (auto q = quant_.find(&c); q != quant_.end()) return add_quantized(k, q->second);
    return add_weight(k, c.dims, c.f);
  }
  int param(int64_t v, const char* what, int64_t lo) const {
    if (v < lo || v > kMaxParam)
      fail(std::string(what) + " " + std::to_string(v) + " is out of range [" + std::to_string(lo) +
           ", " + std::to_string(kMaxParam) + "]");
    return static_cast<int>(v);
  }
  void output(int id) {
    if (n_->output_size() < 1) fail("has no output");
    Val v;
    v.id = id;
    define(n_->output(0), v);
    for (int k = 1; k < n_->output_size(); ++k)
      if (!n_->output(k).empty() && (consumers_.count(n_->output(k)) || graph_outputs_.count(n_->output(k))))
        unsupported("output " + std::to_string(k) + " '" + n_->output(k) + "' is used");
  }
  std::string node_name() { return unique(n_->name(), n_->op_type() + "_" + std::to_string(k_)); }
  int rank_of(int id) const { return static_cast<int>(b_.shape(id).size()); }
  int norm_axis(int64_t axis, int rank) const {
    if (axis < -rank || axis >= rank) fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return static_cast<int>(axis < 0 ? axis + rank : axis);
  }

  // 2-D spatial attributes shared by Conv, ConvTranspose and the pools.
  // Dilations other than 1 only where the caller takes them (Conv, ConvTranspose).
  struct Spatial {
    int kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1;
    Padding2D pad;
  };
  Spatial spatial(bool need_kernel, bool dilation_ok = false) {
    Spatial s;
    const std::vector<int64_t> k = attr_ints("kernel_shape", {});
    if (need_kernel && k.size() != 2) unsupported("kernel_shape must have 2 values (2-D only)");
    if (k.size() == 2) {
      s.kh = param(k[0], "kernel_shape", 1);
      s.kw = param(k[1], "kernel_shape", 1);
    }
    const std::vector<int64_t> st = attr_ints("strides", {1, 1});
    if (st.size() != 2) unsupported("strides must have 2 values (2-D only)");
    s.sh = param(st[0], "stride", 1);
    s.sw = param(st[1], "stride", 1);
    const std::vector<int64_t> dl = attr_ints("dilations", {1, 1});
    if (dl.size() != 2) unsupported("dilations must have 2 values (2-D only)");
    if (!dilation_ok)
      for (int64_t d : dl)
        if (d != 1) unsupported("dilation " + std::to_string(d) + " (only 1)");
    s.dh = param(dl[0], "dilation", 1);
    s.dw = param(dl[1], "dilation", 1);
    const std::string auto_pad = attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") unsupported("auto_pad " + auto_pad + " (give explicit pads)");
    const std::vector<int64_t> p = attr_ints("pads", {0, 0, 0, 0});
    if (p.size() != 4) unsupported("pads must have 4 values (2-D only)");
    if (auto_pad != "VALID")  // ONNX order: x1_begin, x2_begin, x1_end, x2_end
      s.pad = {param(p[0], "pad", 0), param(p[1], "pad", 0), param(p[2], "pad", 0), param(p[3], "pad", 0)};
    return s;
  }
  void check_rank4(int id) {
    if (rank_of(id) != 4) unsupported("input of rank " + std::to_string(rank_of(id)) + " (only NCHW)");
  }

  // ---- conversion ------------------------------------------------------------------------------

  // Every ONNX op the importer understands, once: its name and its converter, which reads the current
  // node (n_) and defines its outputs. check_supported() accepts exactly these names and
  // supported_ops() lists them. Ops whose inputs are all constants fold into a constant (fold()).
  using Converter = void (*)(Importer&);

 public:
  static const std::map<std::string, Converter>& converters() {
    static const std::map<std::string, Converter> table{
        // converted into nodes
        {"Conv", [](Importer& m) { m.conv(); }},
        {"QuantizeLinear", [](Importer& m) { m.quantize(); }},
        {"DequantizeLinear", [](Importer& m) { m.dequantize(); }},
        {"ConvTranspose", [](Importer& m) { m.conv_transpose(); }},
        {"Gemm", [](Importer& m) { m.gemm(); }},
        {"MatMul", [](Importer& m) { m.matmul(); }},
        {"MaxPool", [](Importer& m) { m.pool(true); }},
        {"AveragePool", [](Importer& m) { m.pool(false); }},
        {"GlobalAveragePool", [](Importer& m) { m.global_pool(false); }},
        {"GlobalMaxPool", [](Importer& m) { m.global_pool(true); }},
        {"ReduceMean", [](Importer& m) { m.reduce_mean(); }},
        {"BatchNormalization", [](Importer& m) { m.batchnorm(); }},
        {"InstanceNormalization", [](Importer& m) { m.instance_norm(); }},
        {"Relu", [](Importer& m) { m.activation(ActivationKind::Relu, 0.01f); }},
        {"LeakyRelu", [](Importer& m) { m.activation(ActivationKind::LeakyRelu, m.attr_float("alpha", 0.01f)); }},
        {"Tanh", [](Importer& m) { m.activation(ActivationKind::Tanh, 0.01f); }},
        // Sigmoid / HardSigmoid: a gate x * Sigmoid(x) (find_gates) becomes one activation
        {"Sigmoid", [](Importer& m) { m.gate_or([&] { m.activation(ActivationKind::Sigmoid, 0.01f); }); }},
        {"HardSigmoid", [](Importer& m) {
           m.gate_or([&] {
             m.activation(ActivationKind::HardSigmoid, m.attr_float("alpha", 0.2f), m.attr_float("beta", 0.5f));
           });
         }},
        {"Clip", [](Importer& m) { m.clip(); }},
        {"HardSwish", [](Importer& m) { m.activation(ActivationKind::HardSwish, 0.01f); }},
        {"Elu", [](Importer& m) { m.activation(ActivationKind::Elu, m.attr_float("alpha", 1.f)); }},
        {"Exp", [](Importer& m) { m.activation(ActivationKind::Exp, 0.01f); }},
        {"Sqrt", [](Importer& m) { m.activation(ActivationKind::Sqrt, 0.01f); }},
        {"Neg", [](Importer& m) { m.activation(ActivationKind::Neg, 0.01f); }},
        {"Abs", [](Importer& m) { m.activation(ActivationKind::Abs, 0.01f); }},
        {"Softplus", [](Importer& m) { m.activation(ActivationKind::Softplus, 0.01f); }},
        {"PRelu", [](Importer& m) { m.prelu(); }},
        {"Softmax", [](Importer& m) { m.softmax(); }},
        {"LogSoftmax", [](Importer& m) { m.softmax(/*log=*/true); }},
        {"Flatten", [](Importer& m) { m.flatten(); }},
        {"Split", [](Importer& m) { m.split(); }},
        {"Resize", [](Importer& m) { m.resize(); }},
        {"Upsample", [](Importer& m) { m.upsample(); }},
        {"DepthToSpace", [](Importer& m) { m.depth_to_space(); }},
        // converted, or folded when every input is a constant
        {"Add", [](Importer& m) { m.fold_or([&] { m.binary("Add"); }); }},
        {"Sub", [](Importer& m) { m.fold_or([&] { m.binary("Sub"); }); }},
        {"Mul", [](Importer& m) { m.fold_or([&] { m.binary("Mul"); }); }},
        {"Div", [](Importer& m) { m.fold_or([&] { m.binary("Div"); }); }},
        {"Concat", [](Importer& m) { m.fold_or([&] { m.concat(); }); }},
        // the end of a Reshape -> Transpose -> Reshape chain (channel shuffle, pixel shuffle), or folded,
        // or a reshape node
        {"Reshape", [](Importer& m) {
           if (m.chain_.count(m.n_->input(0))) return m.chain_end();
           m.fold_or([&] { m.reshape(); });
         }},
        // pad2d, or removed (all zero) or merged into the Conv / AveragePool after it (zero constant)
        {"Pad", [](Importer& m) { m.pad(); }},
        // removed
        {"Dropout", [](Importer& m) { m.identity(); }},
        {"Identity", [](Importer& m) { m.identity(); }},
        // folded (constant inputs only; Shape also of activations). Slice of an activation: slice
        // nodes; Transpose of one: only the start of a chain (channel shuffle, pixel shuffle)
        {"Constant", [](Importer& m) { m.define_outputs(m.fold_constant()); }},
        {"Slice", [](Importer& m) { m.in(0).is_const() ? m.define_outputs(m.fold()) : m.slice(); }},
        {"Transpose", [](Importer& m) { m.in(0).is_const() ? m.define_outputs(m.fold()) : m.chain_transpose(); }},
        {"Shape", [](Importer& m) { m.define_outputs(m.fold()); }},
        {"Gather", [](Importer& m) { m.define_outputs(m.fold()); }},
        {"Unsqueeze", [](Importer& m) { m.define_outputs(m.fold()); }},
        {"Squeeze", [](Importer& m) { m.define_outputs(m.fold()); }},
        {"Cast", [](Importer& m) { m.define_outputs(m.fold()); }},
        {"ConstantOfShape", [](Importer& m) { m.define_outputs(m.fold()); }},
    };
    return table;
  }

 private:
  void convert(int k) {
    n_ = &m_.graph().node(k);
    k_ = k;
    const auto it = converters().find(n_->op_type());
    if (it == converters().end()) unsupported("op");  // not reached: check_supported() listed every other op
    it->second(*this);
  }

  // Folds the node into a constant when every input is a constant, else converts it.
  template <class Convert>
  void fold_or(Convert convert_node) {
    bool all_const = true;
    for (int i = 0; i < n_->input_size(); ++i)
      if (has_input(i) && !in(i).is_const()) all_const = false;
    if (all_const) return define_outputs(fold());
    convert_node();
  }

  // A Sigmoid / HardSigmoid that find_gates() matched becomes its gate's activation, else converts.
  template <class Convert>
  void gate_or(Convert convert_node) {
    if (auto gate = gates_.find(k_); gate != gates_.end()) return gated(gate->second);
    convert_node();
  }

  // Identity and Dropout (inference: the input itself; a used mask or training mode is refused).
  void identity() {
    const std::string& op = n_->op_type();
    if (op == "Dropout" && attr_int("training_mode", 0) != 0) unsupported("training mode");
    if (op == "Dropout" && has_input(2) && in(2).is_const() && !in(2).c->i.empty() && in(2).c->i[0] != 0)
      unsupported("training mode");
    const Val v = in(0);
    for (int o = 1; o < n_->output_size(); ++o)
      if (!n_->output(o).empty() && (consumers_.count(n_->output(o)) || graph_outputs_.count(n_->output(o))))
        unsupported("output " + std::to_string(o) + " '" + n_->output(o) + "' (the dropout mask) is used");
    if (n_->output_size() > 0) define(n_->output(0), v);
  }

  void define_outputs(Const c) {
    if (n_->output_size() < 1) fail("has no output");
    define(n_->output(0), constant(std::move(c), n_->output(0)));
  }

  // ---- QDQ (QuantizeLinear / DequantizeLinear, opsets 10-18) ----------------------------------------

  // The integer source of a constant that a DequantizeLinear folded here: when a weight or bias is
  // consumed unchanged (add_weight), the file gets the integers, scale and zero point and a
  // dequantize_linear node (folded again when the model loads), so the int8 data stays in the model.
  // Weights the importer rewrites (Gemm's transpose, alpha) go in as the float32 values.
  struct QuantSource {
    Const q;                     // i8 / u8 / i32 values (type: the ONNX element type)
    std::vector<float> scale;
    std::vector<int64_t> zp;     // empty: none
    int axis = 1;                // resolved against q's rank
  };
  std::map<const Const*, QuantSource> quant_;

  static const char* quant_type_name(int type) {
    switch (type) {
      case onnx::TensorProto::INT8: return "int8";
      case onnx::TensorProto::UINT8: return "uint8";
      case onnx::TensorProto::INT32: return "int32";
      default: return "other";
    }
  }
  static DType quant_dtype(int type) {
    return type == onnx::TensorProto::INT8 ? DType::I8 : type == onnx::TensorProto::UINT8 ? DType::U8 : DType::I32;
  }

  // Attributes of QuantizeLinear / DequantizeLinear: axis (opset >= 13) and nothing newer.
  int quant_axis(int rank, bool per_axis) {
    for (const onnx::AttributeProto& a : n_->attribute())
      if (a.name() != "axis")
        unsupported("attribute '" + a.name() + "' (opset >= 19 / 21: saturate, block_size, output_dtype)");
    if (opset_ < 10) unsupported("needs opset >= 10");
    if (per_axis && opset_ < 13) fail("a per-axis scale needs opset >= 13 (the axis attribute)");
    return per_axis ? norm_axis(attr_int("axis", 1), rank) : 0;  // per tensor: the axis plays no part
  }

  // scale (float constant: one element, or 1-D per axis) and the optional zero point (a constant of
  // `allowed` element types), both checked against x's shape along axis.
  struct QuantParams {
    std::vector<float> scale;
    std::vector<int64_t> zp;
    int zp_type = 0;  // 0: no zero point
    int axis = 1;
  };
  QuantParams quant_params(const Shape& x_dims, bool dequant) {
    QuantParams q;
    const Val& sv = in(1);
    if (!sv.is_const()) unsupported("input 1 (scale) must be a constant");
    if (sv.c->is_int) fail("input 1 (scale) must be a float tensor");
    q.scale = sv.c->f;
    const bool per_axis = q.scale.size() != 1;
    if (per_axis && sv.c->dims.size() != 1) fail("input 1 (scale) must be a scalar or 1-D (got " + str_dims(sv.c->dims) + ")");
    q.axis = quant_axis(static_cast<int>(x_dims.size()), per_axis);
    if (per_axis && static_cast<int64_t>(q.scale.size()) != x_dims[static_cast<size_t>(q.axis)])
      fail("input 1 (scale) has " + std::to_string(q.scale.size()) + " elements but axis " + std::to_string(q.axis) +
           " has " + std::to_string(x_dims[static_cast<size_t>(q.axis)]));
    for (float v : q.scale)
      if (!(std::isfinite(v) && v > 0.f)) fail("input 1 (scale) holds " + std::to_string(v) + " (must be finite and > 0)");
    if (has_input(2)) {
      const Val& zv = in(2);
      if (!zv.is_const()) unsupported("input 2 (zero_point) must be a constant");
      if (!zv.c->is_int) fail("input 2 (zero_point) must be an integer tensor");
      q.zp_type = zv.c->type;
      const bool ok = q.zp_type == onnx::TensorProto::INT8 || q.zp_type == onnx::TensorProto::UINT8 ||
                      (dequant && q.zp_type == onnx::TensorProto::INT32);
      if (!ok)
        unsupported(std::string("zero point of element type ") + std::to_string(q.zp_type) +
                    " (supported: int8, uint8" + (dequant ? ", int32)" : ")"));
      if (zv.c->i.size() != q.scale.size()) fail("input 2 (zero_point) and input 1 (scale) differ in size");
      q.zp = zv.c->i;
    }
    return q;
  }

  // Scale and zero point as builder constants ([1] per tensor, else [n]), after `base`'s name.
  std::vector<int> quant_inputs(const std::string& base, const std::vector<float>& scale,
                                const std::vector<int64_t>& zp, DType zp_dtype) {
    const Shape dims{static_cast<int64_t>(scale.size())};
    std::vector<int> ids{b_.constant(unique(base + "_scale", "scale"), dims, scale)};
    if (!zp.empty())
      ids.push_back(b_.constant(unique(base + "_zero_point", "zero_point"), dims,
                                std::vector<float>(zp.begin(), zp.end()), zp_dtype));
    return ids;
  }

  int add_quantized(int k, const QuantSource& src, const std::string& suffix = "") {
    const std::string base = n_->input(k) + suffix;
    const int q = b_.constant(unique(base + "_quantized", "const"), src.q.dims,
                              std::vector<float>(src.q.i.begin(), src.q.i.end()), quant_dtype(src.q.type));
    std::vector<int> inputs{q};
    for (int id : quant_inputs(base, src.scale, src.zp, quant_dtype(src.q.type))) inputs.push_back(id);
    return b_.node(unique(base, "dequantize"), DequantizeLinearParams{src.axis}, inputs);
  }

  // A quantized rank-2 weight in dense's [F_out, F_in] layout: its integers transposed when the ONNX
  // op stores it [F_in, F_out] (Gemm without transB, MatMul), a per-axis axis moving with them.
  int add_weight_2d(int k, bool transpose) {
    QuantSource src = quant_.at(&weight(k));
    if (!transpose) return add_quantized(k, src);
    const int64_t rows = src.q.dims[0], cols = src.q.dims[1];
    std::vector<int64_t> t(src.q.i.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = src.q.i[static_cast<size_t>(r * cols + c)];
    src.q.i = std::move(t);
    src.q.dims = {cols, rows};
    src.axis = 1 - src.axis;
    return add_quantized(k, src, ".T");
  }

  void quantize() {
    const Val& x = in(0);
    const Shape dims = x.is_const() ? x.c->dims : b_.shape(x.id);
    if (x.is_const() && x.c->is_int) fail("input 0 must be a float tensor");
    const QuantParams qp = quant_params(dims, false);
    const int type = qp.zp_type ? qp.zp_type : onnx::TensorProto::UINT8;
    const bool s8 = type == onnx::TensorProto::INT8;
    if (x.is_const()) {  // e.g. float weights quantized in the graph: fold to the integers
      Const c;
      c.is_int = true;
      c.type = type;
      c.dims = x.c->dims;
      const int64_t inner = inner_size(dims, qp.axis);
      const int64_t n = static_cast<int64_t>(x.c->f.size());
      c.i.resize(x.c->f.size());
      for (int64_t e = 0; e < n; ++e) {
        const size_t ch = qp.scale.size() == 1 ? 0 : static_cast<size_t>((e / inner) % dims[static_cast<size_t>(qp.axis)]);
        const float z = qp.zp.empty() ? 0.f : static_cast<float>(qp.zp[ch]);
        const float v = std::nearbyint(x.c->f[static_cast<size_t>(e)] / qp.scale[ch]) + z;
        const float lo = s8 ? -128.f : 0.f, hi = s8 ? 127.f : 255.f;
        c.i[static_cast<size_t>(e)] = static_cast<int64_t>(std::isnan(v) ? lo : v < lo ? lo : v > hi ? hi : v);
      }
      return define_outputs(std::move(c));
    }
    QuantizeLinearParams p;
    p.axis = qp.axis;
    p.dtype = s8 ? DType::I8 : DType::U8;
    std::vector<int> inputs{x.id};
    for (int id : quant_inputs(node_name(), qp.scale, qp.zp, p.dtype)) inputs.push_back(id);
    output(b_.node(node_name(), p, inputs));
  }

  void dequantize() {
    const Val& x = in(0);
    const Shape dims = x.is_const() ? x.c->dims : b_.shape(x.id);
    const QuantParams qp = quant_params(dims, true);
    if (x.is_const()) {
      const int type = x.c->type;
      if (!x.c->is_int || (type != onnx::TensorProto::INT8 && type != onnx::TensorProto::UINT8 &&
                           type != onnx::TensorProto::INT32))
        unsupported("input 0 must be int8, uint8 or int32 data");
      if (qp.zp_type && qp.zp_type != type)
        fail(std::string("zero point is ") + quant_type_name(qp.zp_type) + " but input 0 is " + quant_type_name(type));
      if (type == onnx::TensorProto::INT32)
        for (int64_t z : qp.zp)
          if (z != 0) fail("an int32 zero point must be 0");
      // ONNX Runtime's arithmetic: float(int32(x) - int32(zp)) * scale.
      Const c;
      c.dims = x.c->dims;
      c.f.resize(x.c->i.size());
      const int64_t inner = inner_size(dims, qp.axis);
      for (size_t e = 0; e < c.f.size(); ++e) {
        const size_t ch = qp.scale.size() == 1 ? 0 : static_cast<size_t>((static_cast<int64_t>(e) / inner) % dims[static_cast<size_t>(qp.axis)]);
        const int64_t z = qp.zp.empty() ? 0 : qp.zp[ch];
        c.f[e] = static_cast<float>(static_cast<int32_t>(x.c->i[e] - z)) * qp.scale[ch];
      }
      define_outputs(std::move(c));
      const Const* folded = values_[n_->output(0)].c.get();
      quant_[folded] = QuantSource{*x.c, qp.scale, qp.zp, qp.axis};
      return;
    }
    std::vector<int> inputs{x.id};
    const DType zd = qp.zp_type ? quant_dtype(qp.zp_type) : DType::U8;
    for (int id : quant_inputs(node_name(), qp.scale, qp.zp, zd)) inputs.push_back(id);
    output(b_.node(node_name(), DequantizeLinearParams{qp.axis}, inputs));
  }

  static int64_t inner_size(const Shape& dims, int axis) {
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) inner *= dims[d];
    return inner;
  }

  void conv() {
    const int x = act(0);
    check_rank4(x);
    const Const& w = weight(1);
    if (w.dims.size() != 4) fail("weight must have rank 4 (got " + str_dims(w.dims) + ")");
    Spatial s = spatial(false, true);
    if (s.kh && (s.kh != w.dims[2] || s.kw != w.dims[3])) fail("kernel_shape does not match the weight");
    Conv2DParams p;
    p.stride_h = s.sh;
    p.stride_w = s.sw;
    p.pad = s.pad;
    p.dilation_h = s.dh;
    p.dilation_w = s.dw;
    p.groups = param(attr_int("group", 1), "group", 1);  // divisibility: shape inference, naming the node
    int data = x;
    auto padded = pending_pad_.find(n_->input(0));
    if (padded != pending_pad_.end()) {
      // Zero padding before a convolution is the convolution's own padding, while the sum stays
      // below the kernel (infer's conv2d rule); otherwise the pad becomes a pad2d node after all.
      const Padding2D& e = padded->second.pad;
      const Padding2D sum{p.pad.top + e.top, p.pad.left + e.left, p.pad.bottom + e.bottom,
                          p.pad.right + e.right};
      // The dilated kernel's extent is what the padding must stay below.
      if (std::max(sum.top, sum.bottom) < (w.dims[2] - 1) * s.dh + 1 &&
          std::max(sum.left, sum.right) < (w.dims[3] - 1) * s.dw + 1) {
        p.pad = sum;
      } else {
        Pad2DParams pp;
        pp.pad = e;
        data = b_.node(unique(padded->second.name, "pad"), pp, {x});
      }
    }
    std::vector<int> inputs{data, add_weight(1)};
    if (has_input(2)) inputs.push_back(add_weight(2));
    output(b_.node(node_name(), p, inputs));
  }

  void conv_transpose() {
    const int x = act(0);
    check_rank4(x);
    if (attr("output_shape", onnx::AttributeProto::INTS)) unsupported("output_shape (give pads and output_padding)");
    const Const& w = weight(1);  // [C_in, C_out/group, KH, KW]
    if (w.dims.size() != 4) fail("weight must have rank 4 (got " + str_dims(w.dims) + ")");
    Spatial s = spatial(false, true);
    if (s.kh && (s.kh != w.dims[2] || s.kw != w.dims[3])) fail("kernel_shape does not match the weight");
    const std::vector<int64_t> op = attr_ints("output_padding", {0, 0});
    if (op.size() != 2) unsupported("output_padding must have 2 values (2-D only)");
    ConvTranspose2DParams p;
    p.stride_h = s.sh;
    p.stride_w = s.sw;
    p.pad = s.pad;
    p.output_padding_h = param(op[0], "output_padding", 0);
    p.output_padding_w = param(op[1], "output_padding", 0);
    p.dilation_h = s.dh;
    p.dilation_w = s.dw;
    p.groups = param(attr_int("group", 1), "group", 1);  // divisibility: shape inference, naming the node
    std::vector<int> inputs{x, add_weight(1)};
    if (has_input(2)) inputs.push_back(add_weight(2));
    output(b_.node(node_name(), p, inputs));
  }

  // y = alpha * A B' + beta * C with A the activation [N, K]: infer's dense weight is [F_out, F_in].
  void gemm() {
    const int x = act(0);
    if (rank_of(x) != 2) unsupported("input of rank " + std::to_string(rank_of(x)) + " (only 2)");
    if (attr_int("transA", 0) != 0) unsupported("transA = 1");
    const Const& bm = weight(1);
    if (bm.dims.size() != 2) fail("B must have rank 2 (got " + str_dims(bm.dims) + ")");
    const bool trans_b = attr_int("transB", 0) != 0;
    const float alpha = attr_float("alpha", 1.f), beta = attr_float("beta", 1.f);
    const int64_t f_out = trans_b ? bm.dims[0] : bm.dims[1], f_in = trans_b ? bm.dims[1] : bm.dims[0];
    std::vector<float> w(bm.f.size());
    for (int64_t o = 0; o < f_out; ++o)
      for (int64_t i = 0; i < f_in; ++i) {
        const float v = trans_b ? bm.f[o * f_in + i] : bm.f[i * f_out + o];
        w[o * f_in + i] = alpha == 1.f ? v : alpha * v;
      }
    const bool scaled = alpha != 1.f || !trans_b;
    const bool quantized = alpha == 1.f && quant_.count(&bm);  // the integers go in (transposed if need be)
    std::vector<int> inputs{x, quantized ? add_weight_2d(1, !trans_b)
                                         : add_weight(1, {f_out, f_in}, std::move(w), scaled ? ".dense" : "")};
    if (has_input(2)) {
      const Const& c = weight(2);
      std::vector<float> bias;
      if (c.numel() == f_out && (c.dims.size() == 1 || (c.dims.size() == 2 && c.dims[0] == 1))) {
        bias = c.f;
      } else if (c.numel() == 1) {
        bias.assign(static_cast<size_t>(f_out), c.f[0]);
      } else {
        unsupported("C of shape " + str_dims(c.dims) + " (only [F_out], [1,F_out] or a scalar)");
      }
      if (beta != 1.f)
        for (float& v : bias) v *= beta;
      if (beta == 1.f && c.dims.size() == 1 && c.numel() == f_out)
        inputs.push_back(add_weight(2));  // as stored (the integers of a quantized bias)
      else
        inputs.push_back(add_weight(2, {f_out}, std::move(bias), beta != 1.f || c.dims.size() != 1 ? ".dense" : ""));
    }
    output(b_.node(node_name(), DenseParams{}, inputs));
  }

  // MatMul(A, B) with B a constant [K, N]; a following Add of a constant [N] (its only consumer)
  // becomes the bias, the pair one dense node.
  void matmul() {
    const int x = act(0);
    if (rank_of(x) != 2) unsupported("input of rank " + std::to_string(rank_of(x)) + " (only 2)");
    const Const& bm = weight(1);
    if (bm.dims.size() != 2) unsupported("B of shape " + str_dims(bm.dims) + " (only rank 2)");
    const int64_t f_in = bm.dims[0], f_out = bm.dims[1];
    std::vector<float> w(bm.f.size());
    for (int64_t o = 0; o < f_out; ++o)
      for (int64_t i = 0; i < f_in; ++i) w[o * f_in + i] = bm.f[i * f_out + o];
    std::vector<int> inputs{x, quant_.count(&bm) ? add_weight_2d(1, true) : add_weight(1, {f_out, f_in}, std::move(w), ".T")};

    const std::string out = n_->output_size() ? n_->output(0) : "";
    const auto& users = consumers_[out];
    int add_node = -1;
    if (users.size() == 1 && !graph_outputs_.count(out)) {
      const onnx::NodeProto& a = m_.graph().node(users[0]);
      if (a.op_type() == "Add" && a.input_size() == 2) {
        const std::string other = a.input(0) == out ? a.input(1) : a.input(0);
        auto it = values_.find(other);
        if (it != values_.end() && it->second.is_const() && !it->second.c->is_int &&
            it->second.c->numel() == f_out && it->second.c->dims.size() <= 2 &&
            !it->second.c->dims.empty() && it->second.c->dims.back() == f_out) {
          add_node = users[0];
          inputs.push_back(b_.constant(unique(other, "bias"), {f_out}, it->second.c->f, opt_.weight_dtype));
        }
      }
    }
    std::string name = node_name();
    const int id = b_.node(name, DenseParams{}, inputs);
    output(id);
    if (add_node >= 0) {
      skip_.insert(add_node);
      Val v;
      v.id = id;
      define(m_.graph().node(add_node).output(0), v);
    }
  }

  // Pad of a 4-D tensor on H and W (constant, reflect, edge) is a pad2d node. PyTorch's
  // Reflection/Replication/ConstantPad2d compute `pads` with a ConstantOfShape ... Cast chain that
  // fold() turns into a constant. An all-zero Pad is dropped. A zero constant Pad whose only reader
  // is a Conv or an AveragePool becomes that node's padding (torch exports
  // avg_pool2d(count_include_pad=True) this way; for the average it is counted, exactly what zero
  // padding means there); a Conv that cannot take it (padding >= kernel) gets the pad2d node.
  void pad() {
    const int x = act(0);
    check_rank4(x);
    const std::string mode = attr_string("mode", "constant");
    Pad2DParams pp;
    if (mode == "constant") pp.mode = PadMode::Constant;
    else if (mode == "reflect") pp.mode = PadMode::Reflect;
    else if (mode == "edge") pp.mode = PadMode::Edge;
    else unsupported("mode " + mode + " (constant, reflect, edge)");
    const std::vector<int64_t> pads = has_input(1) ? ints(1).i : attr_ints("pads", {});
    float value = attr_float("value", 0.f);
    if (has_input(2)) {
      const Const& v = weight(2);
      if (v.numel() != 1) fail("constant_value must be a scalar");
      value = v.f[0];
    }
    if (has_input(3)) unsupported("axes input");
    if (pads.size() != 8) fail("pads must have 8 values for a rank-4 input (got " + str_dims(pads) + ")");
    bool zero = true;
    for (int64_t p : pads) {
      if (p == kBatch) unsupported("pads computed from the batch dimension");
      if (p < 0) unsupported("negative pads (cropping)");
      zero = zero && p == 0;
    }
    if (pads[0] || pads[1] || pads[4] || pads[5])
      unsupported("pads " + str_dims(pads) + " on the batch or channel axis (only H and W)");
    Val v;
    v.id = x;
    const std::string out = n_->output_size() ? n_->output(0) : "";
    if (zero) return define(out, v);
    // ONNX order: x1_begin, x2_begin, x3_begin, x4_begin, x1_end, ...
    pp.pad = {param(pads[2], "pad", 0), param(pads[3], "pad", 0), param(pads[6], "pad", 0),
              param(pads[7], "pad", 0)};
    pp.value = pp.mode == PadMode::Constant ? value : 0.f;
    const auto& users = consumers_[out];
    if (pp.mode == PadMode::Constant && value == 0.f && users.size() == 1 && !graph_outputs_.count(out)) {
      const std::string& next = m_.graph().node(users[0]).op_type();
      if ((next == "AveragePool" || next == "Conv") && m_.graph().node(users[0]).input(0) == out) {
        pending_pad_[out] = {pp.pad, n_->name().empty() ? "Pad_" + std::to_string(k_) : n_->name()};
        return define(out, v);
      }
    }
    output(b_.node(node_name(), pp, {x}));
  }

  void pool(bool max) {
    const int x = act(0);
    check_rank4(x);
    const int64_t ceil_mode = attr_int("ceil_mode", 0);
    if (ceil_mode != 0 && ceil_mode != 1) fail("ceil_mode must be 0 or 1");
    if (max && attr_int("storage_order", 0) != 0) unsupported("storage_order = 1");
    Spatial s = spatial(true);
    Pool2DParams p;
    p.kind = max ? PoolKind::Max : PoolKind::Average;
    p.kernel_h = s.kh;
    p.kernel_w = s.kw;
    p.stride_h = s.sh;
    p.stride_w = s.sw;
    p.pad = s.pad;
    p.count_include_pad = !max && attr_int("count_include_pad", 0) != 0;
    int data = x;
    p.ceil_mode = ceil_mode == 1;  // PyTorch's rule (the last window starts inside the input or top/left pad)
    auto padded = pending_pad_.find(n_->input(0));
    if (padded != pending_pad_.end()) {
      // A zero Pad's cells count in the average: the pool's own padding with count_include_pad,
      // when the pool counts its own padding too and the sum stays below the kernel; else pad2d.
      const Padding2D& e = padded->second.pad;
      const bool own = p.pad.top || p.pad.left || p.pad.bottom || p.pad.right;
      const Padding2D sum{p.pad.top + e.top, p.pad.left + e.left, p.pad.bottom + e.bottom,
                          p.pad.right + e.right};
      if ((!own || p.count_include_pad) && std::max(sum.top, sum.bottom) < p.kernel_h &&
          std::max(sum.left, sum.right) < p.kernel_w) {
        p.pad = sum;
        p.count_include_pad = true;
      } else {
        Pad2DParams pp;
        pp.pad = e;
        data = b_.node(unique(padded->second.name, "pad"), pp, {x});
      }
    }
    output(b_.node(node_name(), p, {data}));
  }

  void global_pool(bool max) {
    const int x = act(0);
    check_rank4(x);
    output(global_average(x, node_name(), max));
  }

  // An average (or max) pool whose window is the whole (4-D) input plane.
  int global_average(int x, const std::string& name, bool max = false) {
    const Shape& s = b_.shape(x);
    Pool2DParams p;
    p.kind = max ? PoolKind::Max : PoolKind::Average;
    p.kernel_h = p.stride_h = param(s[2], "height", 1);
    p.kernel_w = p.stride_w = param(s[3], "width", 1);
    return b_.node(name, p, {x});
  }

  // ReduceMean over the two spatial axes of a 4-D tensor is global average pooling: PyTorch's
  // dynamo exporter (the default of torch.onnx.export since 2.9) writes adaptive_avg_pool2d(x, 1) and
  // x.mean((2, 3)) this way. keepdims = 0 adds a flatten to [N, C]. Other axes are refused.
  void reduce_mean() {
    const int x = act(0);
    std::vector<int64_t> axes;
    if (opset_ >= 18) {
      if (has_input(1)) axes = ints(1).i;
    } else {
      axes = attr_ints("axes", {});
    }
    if (axes.empty()) {
      if (opset_ >= 18 && attr_int("noop_with_empty_axes", 0) != 0) unsupported("noop_with_empty_axes = 1");
      unsupported("a mean over every axis (only the spatial axes 2 and 3 of a 4-D input)");
    }
    const int rank = rank_of(x);
    std::set<int> norm;
    for (int64_t a : axes) norm.insert(norm_axis(a, rank));
    if (rank != 4 || norm != std::set<int>{2, 3})
      unsupported("axes " + str_dims(axes) + " of a rank-" + std::to_string(rank) +
                  " input (only the spatial axes 2 and 3 of a 4-D input)");
    const int64_t keepdims = attr_int("keepdims", 1);
    if (keepdims != 0 && keepdims != 1) fail("keepdims must be 0 or 1");
    const std::string name = node_name();
    int y = global_average(x, name);
    if (keepdims == 0) {
      FlattenParams f;
      f.axis = 1;
      y = b_.node(unique(name + "_flatten", "flatten"), f, {y});
    }
    output(y);
  }

  // The resize op's mode from an ONNX mode attribute (Resize, Upsample): nearest or linear (bilinear).
  ResizeMode resize_mode() const {
    const std::string mode = attr_string("mode", "nearest");
    if (mode == "nearest") return ResizeMode::Nearest;
    if (mode == "linear") return ResizeMode::Linear;
    unsupported("mode " + mode + " (only nearest and linear)");
  }

  // Scales [N, C, H, W] that keep the batch and the channels, into p's scale_h / scale_w (each at
  // least `min_scale`, and > 0).
  void resize_scales(ResizeParams& p, const std::vector<float>& scales, float min_scale) const {
    if (scales.size() != 4) fail("needs 4 scales for an NCHW input (got " + std::to_string(scales.size()) + ")");
    if (scales[0] != 1.f || scales[1] != 1.f)
      unsupported("scales [" + std::to_string(scales[0]) + ", " + std::to_string(scales[1]) +
                  "] on the batch and channel axes (only 1)");
    for (float f : {scales[2], scales[3]})
      if (!std::isfinite(f) || f <= 0 || f < min_scale)
        fail("scale " + std::to_string(f) + " must be finite and " +
             (min_scale > 0 ? ">= " + std::to_string(min_scale) : std::string("> 0")));
    p.scale_h = scales[2];
    p.scale_w = scales[3];
  }

  // Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) with constant scales or sizes that keep
  // the batch and channels: nearest or linear (bilinear) with the coordinate and rounding modes
  // PyTorch exports (opset 10 has neither attribute: asymmetric, floor).
  void resize() {
    const int x = act(0);
    check_rank4(x);
    ResizeParams p;
    p.mode = resize_mode();
    static const std::map<std::string, ResizeCoord> coords{
        {"half_pixel", ResizeCoord::HalfPixel}, {"align_corners", ResizeCoord::AlignCorners},
        {"asymmetric", ResizeCoord::Asymmetric}, {"pytorch_half_pixel", ResizeCoord::PytorchHalfPixel}};
    static const std::map<std::string, ResizeNearest> roundings{
        {"floor", ResizeNearest::Floor}, {"ceil", ResizeNearest::Ceil},
        {"round_prefer_floor", ResizeNearest::RoundPreferFloor},
        {"round_prefer_ceil", ResizeNearest::RoundPreferCeil}};
    const std::string coord = opset_ >= 11 ? attr_string("coordinate_transformation_mode", "half_pixel") : "asymmetric";
    const std::string rounding = opset_ >= 11 ? attr_string("nearest_mode", "round_prefer_floor") : "floor";
    if (!coords.count(coord)) unsupported("coordinate_transformation_mode " + coord);
    if (!roundings.count(rounding)) unsupported("nearest_mode " + rounding);
    p.coord = coords.at(coord);
    p.nearest = roundings.at(rounding);
    if (attr_int("exclude_outside", 0) != 0) unsupported("exclude_outside = 1");
    if (attr_int("antialias", 0) != 0) unsupported("antialias = 1");
    if (!attr_ints("axes", {}).empty()) unsupported("axes (give scales or sizes for all 4 axes)");
    if (attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
      unsupported("keep_aspect_ratio_policy " + attr_string("keep_aspect_ratio_policy", ""));
    const Shape& s = b_.shape(x);
    const int scales_at = opset_ >= 11 ? 2 : 1;
    const std::vector<float> scales = has_input(scales_at) ? weight(scales_at).f : std::vector<float>{};
    const std::vector<int64_t> sizes = opset_ >= 11 && has_input(3) ? ints(3).i : std::vector<int64_t>{};
    if (sizes.size() == 4) {  // sizes[0] is the batch (free here)
      if (sizes[1] != s[1]) unsupported("sizes that change the channels");
      p.out_h = param(sizes[2], "sizes height", 1);
      p.out_w = param(sizes[3], "sizes width", 1);
    } else if (scales.size() == 4) {
      resize_scales(p, scales, 0.f);
    } else {
      fail("needs constant scales or sizes with 4 values (got " + std::to_string(scales.size()) + " scales, " +
           std::to_string(sizes.size()) + " sizes)");
    }
    output(b_.node(node_name(), p, {x}));
  }

  // Upsample (opset 7-9, deprecated from 10 where exporters write Resize): scales from the `scales`
  // attribute (opset 7, 8) or a constant input (9), each >= 1; output floor(in * scale); the source
  // coordinate is out / scale ("asymmetric") and nearest rounds down: the resize op as Resize-10 has it.
  void upsample() {
    if (opset_ >= 10) unsupported("Upsample is deprecated from opset 10 (use Resize)");
    const int x = act(0);
    check_rank4(x);
    ResizeParams p;
    p.mode = resize_mode();
    p.coord = ResizeCoord::Asymmetric;
    p.nearest = ResizeNearest::Floor;
    std::vector<float> scales;
    if (opset_ >= 9) {
      scales = weight(1).f;
    } else {
      const onnx::AttributeProto* a = attr("scales", onnx::AttributeProto::FLOATS);
      if (!a) fail("needs the scales attribute (opset " + std::to_string(opset_) + ")");
      scales.assign(a->floats().begin(), a->floats().end());
    }
    resize_scales(p, scales, 1.f);
    output(b_.node(node_name(), p, {x}));
  }

  // DepthToSpace: PyTorch's PixelShuffle exports mode CRD (opset 11+); DCR is ONNX's default.
  void depth_to_space() {
    const int x = act(0);
    check_rank4(x);
    DepthToSpaceParams p;
    p.block = param(attr_int("blocksize", 0), "blocksize", 1);
    const std::string mode = attr_string("mode", "DCR");
    if (mode == "DCR") p.mode = DepthToSpaceMode::DCR;
    else if (mode == "CRD") p.mode = DepthToSpaceMode::CRD;
    else fail("mode " + mode + " (DCR or CRD)");
    output(b_.node(node_name(), p, {x}));
  }

  void batchnorm() {
    const int x = act(0);
    if (attr_int("training_mode", 0) != 0) unsupported("training_mode = 1");
    if (opset_ < 9 && attr_int("spatial", 1) != 1) unsupported("spatial = 0 (per-element statistics)");
    BatchNormParams p;
    p.epsilon = attr_float("epsilon", 1e-5f);
    std::vector<int> inputs{x};
    for (int k = 1; k <= 4; ++k) inputs.push_back(add_weight(k));
    output(b_.node(node_name(), p, inputs));
  }

  void instance_norm() {
    const int x = act(0);
    if (rank_of(x) < 3) unsupported("input of rank " + std::to_string(rank_of(x)) + " (needs >= 3)");
    InstanceNormParams p;
    p.epsilon = attr_float("epsilon", 1e-5f);
    output(b_.node(node_name(), p, {x, add_weight(1), add_weight(2)}));
  }

  void activation(ActivationKind kind, float alpha, float beta = 0.f) {
    if (!std::isfinite(alpha) || !std::isfinite(beta)) fail("alpha and beta must be finite");
    ActivationParams p;
    p.activation.kind = kind;
    p.activation.alpha = alpha;
    p.activation.beta = beta;
    output(b_.node(node_name(), p, {act(0)}));
  }

  // The gate node of a find_gates pattern: one activation named after the Mul, defining its output.
  struct Gate {
    ActivationKind kind;
    int mul;  // index of the Mul node, skipped
  };
  void gated(const Gate& gate) {
    const onnx::NodeProto& mul = m_.graph().node(gate.mul);
    ActivationParams p;
    p.activation.kind = gate.kind;
    const std::string name = unique(mul.name(), std::string(activation_name(gate.kind)) + "_" +
                                                    std::to_string(gate.mul));
    Val v;
    v.id = b_.node(name, p, {act(0)});
    define(mul.output(0), v);
    skip_.insert(gate.mul);
  }

  // Clip: bounds from attributes (opset < 11) or optional constant scalar inputs 1 and 2 (an empty
  // name = no bound). No lower and no upper bound is a copy; min 0 without max is relu (its faster
  // kernels); an absent bound is otherwise the largest finite float (the format needs finite values).
  void clip() {
    constexpr float kHuge = std::numeric_limits<float>::max();
    float lo = -kHuge, hi = kHuge;
    bool has_lo = false, has_hi = false;
    if (opset_ < 11) {
      const onnx::AttributeProto* a = attr("min", onnx::AttributeProto::FLOAT);
      const onnx::AttributeProto* b = attr("max", onnx::AttributeProto::FLOAT);
      if (a) lo = a->f(), has_lo = true;
      if (b) hi = b->f(), has_hi = true;
    } else {
      const auto bound = [&](int k, float& v, bool& has) {
        if (!has_input(k)) return;
        const Const& c = weight(k);
        if (c.numel() != 1) fail(std::string(k == 1 ? "min" : "max") + " must be a scalar");
        v = c.f[0];
        has = true;
      };
      bound(1, lo, has_lo);
      bound(2, hi, has_hi);
    }
    if (std::isnan(lo) || std::isnan(hi)) fail("min and max must not be NaN");
    lo = std::max(lo, -kHuge);  // -inf / +inf bounds mean "no bound"
    hi = std::min(hi, kHuge);
    if (lo > hi) unsupported("min " + std::to_string(lo) + " > max " + std::to_string(hi));
    if (!has_lo && !has_hi) {
      Val v;
      v.id = act(0);
      return define(n_->output_size() ? n_->output(0) : "", v);
    }
    if (has_lo && lo == 0.f && (!has_hi || hi == kHuge)) return activation(ActivationKind::Relu, 0.01f);
    activation(ActivationKind::Clip, lo, hi);
  }

  // PRelu: the slope broadcasts to x unidirectionally (aligned at the last dim), so it is per channel
  // exactly when its shape aligned to x's rank is [1,C,1,...] ([C] on [N,C], [C,1,1] on [N,C,H,W], as
  // PyTorch's nn.PReLU exports it), and shared when it holds one value ([1], a scalar).
  void prelu() {
    const int x = act(0);
    const Shape& xs = b_.shape(x);
    const Const& c = weight(1);
    if (xs.size() < 2) unsupported("input of rank " + std::to_string(xs.size()) + " (needs >= 2)");
    if (c.numel() == 1) return output(b_.node(node_name(), PReluParams{}, {x, add_weight(1, {1}, c.f)}));
    Shape aligned(xs.size() > c.dims.size() ? xs.size() - c.dims.size() : 0, 1);
    aligned.insert(aligned.end(), c.dims.begin(), c.dims.end());
    bool per_channel = aligned.size() == xs.size() && aligned[0] == 1 && aligned[1] == xs[1];
    for (size_t d = 2; d < aligned.size(); ++d) per_channel = per_channel && aligned[d] == 1;
    if (!per_channel)
      unsupported("slope of shape " + str_dims(c.dims) + " for input " + str_dims(xs) +
                  " (only one value or one per channel: [C], [C,1,...])");
    output(b_.node(node_name(), PReluParams{}, {x, add_weight(1, {xs[1]}, c.f)}));
  }

  // Softmax and LogSoftmax (log) along one axis (axis 1 of an NCHW tensor: its channels).
  void softmax(bool log = false) {
    const int x = act(0);
    const int rank = rank_of(x);
    // Before opset 13 (Log)Softmax flattened to 2-D at `axis` (default 1): the same as a softmax over
    // the last axis only when axis is the last one.
    const int64_t axis = attr_int("axis", opset_ < 13 ? 1 : -1);
    const int a = norm_axis(axis, rank);
    if (opset_ < 13 && a != rank - 1) unsupported("opset < 13 softmax over more than the last axis");
    if (log) return output(b_.node(node_name(), LogSoftmaxParams{a}, {x}));
    SoftmaxParams p;
    p.axis = a;
    output(b_.node(node_name(), p, {x}));
  }

  void flatten() {
    const int x = act(0);
    // ONNX Flatten always gives 2-D [prod(dims < axis), prod(dims >= axis)]: infer's flatten keeps
    // the batch, so only axis 1 means the same.
    const int64_t axis = attr_int("axis", 1);
    if (axis != 1 && axis != 1 - rank_of(x)) unsupported("axis " + std::to_string(axis) + " (only 1)");
    FlattenParams p;
    p.axis = 1;
    output(b_.node(node_name(), p, {x}));
  }

  // Target shapes keep the batch: their first entry must be the batch (the folded batch sentinel, 0
  // = copy, the fixed batch the model was exported at (1 for dynamic exports), or -1 where the rest
  // fixes the per-sample size). A leading entry equal to the exported batch B > 1 that is also one of
  // the input's per-sample dims could be that dim used as a number (x.view(C, -1) traced at batch C):
  // the importer cannot tell, so rather than guess it keeps the model at B (PinBatch, import_impl).
  // Not so where the Reshape starts a channel- or pixel-shuffle chain (chain_start): that moves data
  // only within a sample, so its leading B is the batch.
  void reshape() {
    const int x = act(0);
    const Const& t = ints(1);
    if (t.dims.size() != 1) fail("shape must be a 1-D tensor");
    const Shape& xs = b_.shape(x);
    const bool allow_zero = attr_int("allowzero", 0) != 0;
    if (t.i.empty()) unsupported("reshape to a scalar");
    Shape rest;
    bool minus_one = false;
    for (size_t k = 1; k < t.i.size(); ++k) {
      int64_t d = t.i[k];
      if (d == kBatch) unsupported("the batch dimension moves inside the shape");
      if (d == 0 && !allow_zero) {
        if (k >= xs.size()) fail("shape[" + std::to_string(k) + "] = 0 copies a dimension the input lacks");
        d = xs[k];
      }
      if (d == -1) minus_one = true;
      else if (d < 1) fail("shape[" + std::to_string(k) + "] = " + std::to_string(d) + " is invalid");
      rest.push_back(d);
    }
    const int64_t first = t.i[0];
    const int64_t exported = exported_batch_ > 0 ? exported_batch_ : 1;
    bool batch = first == kBatch || (first == 0 && !allow_zero) || first == exported;
    const std::optional<ChainStage> chain = chain_start(xs, rest);
    if (first == exported && exported > 1 && pinned_.empty() && !chain &&
        std::find(xs.begin() + 1, xs.end(), exported) != xs.end()) {
      Shape traced = xs;  // the input as the exporter saw it
      traced[0] = exported;
      throw PinBatch{node_label() + ": shape " + str_dims(t.i) + " starts with " + std::to_string(exported) +
                     ", which is both the exported batch (input '" + exported_batch_from_ +
                     "') and a dimension of its input " + str_dims(traced) +
                     ", so the batch cannot be told apart; to run at other batches, export at a batch "
                     "that differs from every other dimension, or with a dynamic batch axis"};
    }
    if (first == -1 && !minus_one) {
      const int64_t per_sample = checked_numel(Shape(xs.begin() + 1, xs.end()), node_label());
      const int64_t want = checked_numel(rest, node_label());
      batch = want == per_sample;
    }
    if (!batch)
      unsupported("shape " + str_dims(t.i) + " changes the batch dimension" +
                  (exported_batch_ > 1 ? " (the model was exported at batch " +
                                             std::to_string(exported_batch_) + ")"
                                       : std::string()));
    if (chain) {  // the output stands for x until the chain's last Reshape
      Val v;
      v.id = x;
      define(n_->output(0), v);
      chain_[n_->output(0)] = *chain;
      return;
    }
    // [N, C, H, W] -> [N, C*H*W] is a flatten (the dynamo exporter writes torch.flatten(x, 1) as a
    // Reshape): the same node as the Flatten that older exporters and model-zoo write.
    if (xs.size() > 2 && rest.size() == 1 &&
        (rest[0] == -1 || rest[0] == checked_numel(Shape(xs.begin() + 1, xs.end()), node_label()))) {
      FlattenParams f;
      f.axis = 1;
      return output(b_.node(node_name(), f, {x}));
    }
    ReshapeParams p;
    p.shape = rest;
    output(b_.node(node_name(), p, {x}));
  }

  static bool is_arith(const std::string& op) {
    return op == "Add" || op == "Sub" || op == "Mul" || op == "Div";
  }
  static BinaryKind arith_kind(const std::string& op) {
    return op == "Sub" ? BinaryKind::Sub : op == "Mul" ? BinaryKind::Mul : op == "Div" ? BinaryKind::Div
                                                                             : BinaryKind::Add;
  }

  // Add / Sub / Mul / Div with at least one activation input (all-constant ones are folded). An Add
  // of two equally shaped activations stays the residual `add` node (what older files hold and the
  // conv + residual fusion looks for); everything else is a broadcasting `binary` node. A constant
  // operand drops leading 1s beyond the activation's rank (torch exports scalars and [1,C,1,1]
  // shapes), a scalar becomes [1].
  void binary(const std::string& op) {
    const Val va = in(0), vb = in(1);
    if (!va.is_const() && !vb.is_const() && op == "Add" && b_.shape(va.id) == b_.shape(vb.id))
      return output(b_.node(node_name(), AddParams{}, {va.id, vb.id}));
    const int rank = rank_of(va.is_const() ? vb.id : va.id);
    auto operand = [&](int k, const Val& v) {
      if (!v.is_const()) return v.id;
      if (v.c->is_int) unsupported("input " + std::to_string(k) + " '" + n_->input(k) +
                                   "' is an integer constant used with a computed tensor");
      Shape dims = v.c->dims;
      while (static_cast<int>(dims.size()) > rank && dims.front() == 1) dims.erase(dims.begin());
      if (dims.empty()) dims = {1};
      return add_weight(k, dims, v.c->f);
    };
    BinaryParams p;
    p.kind = arith_kind(op);
    const int a = operand(0, va), bb = operand(1, vb);
    output(b_.node(node_name(), p, {a, bb}));
  }

  // ---- Reshape -> Transpose -> Reshape chains, slices and splits along an axis -------------------

  // Exporters write two per-sample rearrangements of x [N,C,H,W] as a view, a transpose and a view
  // back, each the only reader of the one before:
  //  - ShuffleNet's channel shuffle: [N,g,C/g,H,W], perm (0,2,1,3,4), back to [N,C,H,W]
  //    -> channel_shuffle (groups g);
  //  - PixelShuffle below opset 11 (and by hand at any opset): [N,C',r,r,H,W], perm (0,1,4,2,5,3)
  //    (CRD), or [N,r,r,C',H,W], perm (0,3,4,1,5,2) (DCR), to [N,C',H*r,W*r] -> depth_to_space.
  // The first Reshape starts the chain (its output stands for x), the Transpose passes it on, the last
  // Reshape writes the node. Any other use of the intermediates is refused.
  struct ChainStage {
    enum Kind { ChannelShuffle, DepthToSpaceCRD, DepthToSpaceDCR };
    Kind kind = ChannelShuffle;
    int factor = 1;             // groups, or the block size
    std::vector<int64_t> perm;  // the Transpose's
    Shape view;                 // the value's per-sample shape (permuted once transposed)
    Shape result;               // the per-sample shape the last Reshape must give
    bool transposed = false;
  };
  bool only_reader_is(const std::string& value, const char* op) {
    const auto it = consumers_.find(value);
    return it != consumers_.end() && it->second.size() == 1 && !graph_outputs_.count(value) &&
           m_.graph().node(it->second[0]).op_type() == op;
  }
  // `rest` (per-sample target dims, 0s already copied) with a single -1 worked out from `per_sample`
  // (>= 1) elements; as given when that is not possible (the caller's shape checks then fail).
  static Shape resolve_rest(Shape rest, int64_t per_sample) {
    int64_t known = 1;
    int unknown = 0;
    for (int64_t d : rest) {
      if (d == -1) ++unknown;
      else if (d < 1 || d > per_sample / known) return rest;  // cannot fit (and no overflow)
      else known *= d;
    }
    if (unknown == 1 && per_sample % known == 0)
      std::replace(rest.begin(), rest.end(), int64_t{-1}, per_sample / known);
    return rest;
  }
  // The chain that this Reshape of x (per-sample target `rest`) starts, looking ahead at the perm of
  // the Transpose that alone reads it; none when it is not one of the patterns above.
  std::optional<ChainStage> chain_start(const Shape& xs, const Shape& rest_in) {
    const std::string out = n_->output_size() ? n_->output(0) : "";
    if (xs.size() != 4 || (rest_in.size() != 4 && rest_in.size() != 5) || !only_reader_is(out, "Transpose"))
      return std::nullopt;
    const Shape rest = resolve_rest(rest_in, xs[1] * xs[2] * xs[3]);
    ChainStage c;
    for (const onnx::AttributeProto& a : m_.graph().node(consumers_.at(out)[0]).attribute())
      if (a.name() == "perm") c.perm.assign(a.ints().begin(), a.ints().end());
    const int64_t C = xs[1], H = xs[2], W = xs[3];
    // Products of the target's dims only after they are known to divide C (no overflow).
    const auto splits = [&](std::initializer_list<int64_t> parts) {
      int64_t left = C;
      for (int64_t d : parts) {
        if (d < 1 || left % d) return false;
        left /= d;
      }
      return left == 1;
    };
    if (rest.size() == 4 && c.perm == std::vector<int64_t>{0, 2, 1, 3, 4} && rest[2] == H && rest[3] == W &&
        splits({rest[0], rest[1]})) {
      c.kind = ChainStage::ChannelShuffle;
      c.factor = static_cast<int>(rest[0]);
      c.result = {C, H, W};
    } else if (rest.size() == 5 && rest[3] == H && rest[4] == W && splits({rest[0], rest[1], rest[2]})) {
      if (c.perm == std::vector<int64_t>{0, 1, 4, 2, 5, 3} && rest[1] == rest[2]) {
        c.kind = ChainStage::DepthToSpaceCRD;  // [C', r, r, H, W]
        c.factor = static_cast<int>(rest[1]);
        c.result = {rest[0], H * rest[1], W * rest[1]};
      } else if (c.perm == std::vector<int64_t>{0, 3, 4, 1, 5, 2} && rest[0] == rest[1]) {
        c.kind = ChainStage::DepthToSpaceDCR;  // [r, r, C', H, W]
        c.factor = static_cast<int>(rest[0]);
        c.result = {rest[2], H * rest[0], W * rest[0]};
      } else {
        return std::nullopt;
      }
    } else {
      return std::nullopt;
    }
    c.view = rest;
    return c;
  }
  void chain_transpose() {
    const auto it = chain_.find(n_->input(0));
    const std::vector<int64_t> perm = attr_ints("perm", {});
    if (it == chain_.end() || it->second.transposed || perm != it->second.perm)
      unsupported("Transpose of an activation (only a channel shuffle: Reshape to [N,g,C/g,H,W], perm "
                  "(0,2,1,3,4), Reshape back; or a pixel shuffle: Reshape to [N,C,r,r,H,W], perm "
                  "(0,1,4,2,5,3), or to [N,r,r,C,H,W], perm (0,3,4,1,5,2), Reshape to [N,C,H*r,W*r])");
    const std::string out = n_->output_size() ? n_->output(0) : "";
    if (!only_reader_is(out, "Reshape")) unsupported("a shuffle's Transpose not followed by its Reshape");
    ChainStage c = it->second;
    for (size_t k = 0; k < c.view.size(); ++k) c.view[k] = it->second.view[static_cast<size_t>(perm[k + 1] - 1)];
    c.transposed = true;
    define(out, in(0));
    chain_[out] = std::move(c);
  }
  void chain_end() {
    const ChainStage& c = chain_.at(n_->input(0));
    if (!c.transposed) unsupported("Reshape of a shuffle's view before its Transpose");
    const int x = act(0);
    const Const& t = ints(1);
    const bool allow_zero = attr_int("allowzero", 0) != 0;
    const int64_t exported = exported_batch_ > 0 ? exported_batch_ : 1;
    Shape rest;
    for (size_t k = 1; k < t.i.size(); ++k) {
      int64_t d = t.i[k];
      if (d == 0 && !allow_zero) d = k <= c.view.size() ? c.view[k - 1] : 0;  // 0 copies the view's dim k
      rest.push_back(d);
    }
    const int64_t first = t.i.empty() ? 0 : t.i[0];
    const bool minus_one = std::find(rest.begin(), rest.end(), int64_t{-1}) != rest.end();
    const bool batch = first == kBatch || (first == 0 && !allow_zero) || first == exported || (first == -1 && !minus_one);
    if (t.i.size() != 4 || !batch || resolve_rest(rest, checked_numel(c.result, node_label())) != c.result)
      unsupported("shape " + str_dims(t.i) + " after a " +
                  (c.kind == ChainStage::ChannelShuffle ? "channel shuffle" : "pixel shuffle") +
                  " (needs [N," + str_dims(c.result).substr(1) + ")");
    if (c.kind == ChainStage::ChannelShuffle) {
      ChannelShuffleParams p;
      p.groups = c.factor;
      return output(b_.node(node_name(), p, {x}));
    }
    DepthToSpaceParams p;
    p.block = c.factor;
    p.mode = c.kind == ChainStage::DepthToSpaceCRD ? DepthToSpaceMode::CRD : DepthToSpaceMode::DCR;
    output(b_.node(node_name(), p, {x}));
  }

  // Slice of an activation: steps 1, along axes >= 1; every axis that is not taken whole becomes one
  // slice node (ends clamp as ONNX says).
  // Slice's starts, ends, axes and steps: attributes before opset 10, constant inputs from it on
  // (axes and steps optional). Shared by the slice of an activation and the constant fold.
  struct SliceArgs {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  SliceArgs slice_args() {
    SliceArgs a;
    if (opset_ < 10) {
      a.starts = attr_ints("starts", {});
      a.ends = attr_ints("ends", {});
      a.axes = attr_ints("axes", {});
    } else {
      a.starts = ints(1).i;
      a.ends = ints(2).i;
      if (has_input(3)) a.axes = ints(3).i;
      if (has_input(4)) a.steps = ints(4).i;
    }
    return a;
  }

  void slice() {
    const int x = act(0);
    const Shape& xs = b_.shape(x);
    const int r = static_cast<int>(xs.size());
    auto [starts, ends, axes, steps] = slice_args();
    if (starts.size() != ends.size() || (!axes.empty() && axes.size() != starts.size()) ||
        (!steps.empty() && steps.size() != starts.size()))
      fail("starts, ends, axes and steps differ in length");
    int y = x;
    for (size_t k = 0; k < starts.size(); ++k) {
      const int a = norm_axis(axes.empty() ? static_cast<int64_t>(k) : axes[k], r);
      if (!steps.empty() && steps[k] != 1) unsupported("step " + std::to_string(steps[k]) + " (only 1)");
      const int64_t n = xs[static_cast<size_t>(a)];
      auto clampi = [&](int64_t v) {
        if (v == kBatch) unsupported("slice bounds computed from the batch dimension");
        if (v < 0) v = v < -n ? 0 : v + n;
        return std::clamp<int64_t>(v, 0, n);
      };
      const int64_t b = clampi(starts[k]), e = clampi(ends[k]);
      if (b == 0 && e == n) continue;  // the whole axis
      if (a == 0) unsupported("a slice of the batch axis");
      if (e <= b) unsupported("an empty slice");
      SliceParams p;
      p.axis = a;
      p.start = b;
      p.end = e;
      y = b_.node(k + 1 == starts.size() ? node_name() : unique(n_->name() + "_axis" + std::to_string(a), "slice"), p, {y});
    }
    Val v;
    v.id = y;
    define(n_->output_size() ? n_->output(0) : "", v);
  }

  // Split along an axis >= 1 into consecutive parts: one slice node per output.
  void split() {
    const int x = act(0);
    const Shape& xs = b_.shape(x);
    const int a = norm_axis(attr_int("axis", 0), static_cast<int>(xs.size()));
    if (a == 0) unsupported("a split of the batch axis");
    const int64_t n = xs[static_cast<size_t>(a)];
    std::vector<int64_t> sizes = has_input(1) ? ints(1).i : attr_ints("split", {});
    const int outputs = n_->output_size();
    if (outputs < 1) fail("has no output");
    if (sizes.empty()) {  // equal parts (the last smaller when num_outputs does not divide, opset 18)
      const int64_t part = (n + outputs - 1) / outputs;
      for (int k = 0; k < outputs; ++k) sizes.push_back(std::min<int64_t>(part, n - part * k));
    }
    if (static_cast<int>(sizes.size()) != outputs)
      fail("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outputs) + " outputs");
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 1) unsupported("split size " + std::to_string(s) + " (each part must be non-empty)");
      total += s;
    }
    if (total != n) fail("split sizes " + str_dims(sizes) + " do not add up to " + std::to_string(n));
    int64_t start = 0;
    const std::string base = n_->name().empty() ? "Split_" + std::to_string(k_) : n_->name();
    for (int k = 0; k < outputs; ++k) {
      SliceParams p;
      p.axis = a;
      p.start = start;
      p.end = start + sizes[static_cast<size_t>(k)];
      start = p.end;
      Val v;
      v.id = b_.node(unique(base + "_" + std::to_string(k), "split"), p, {x});
      define(n_->output(k), v);
    }
  }

  void add() {
    const int a = act(0), bb = act(1);
    output(b_.node(node_name(), AddParams{}, {a, bb}));
  }

  void concat() {
    std::vector<int> inputs;
    for (int k = 0; k < n_->input_size(); ++k) inputs.push_back(act(k));
    if (inputs.empty()) fail("has no inputs");
    ConcatParams p;
    p.axis = norm_axis(attr_int("axis", 1), rank_of(inputs[0]));
    output(b_.node(node_name(), p, inputs));
  }

  // ---- constant folding (integer shape math, constant weights) ---------------------------------

  Const fold_constant() {
    for (const onnx::AttributeProto& a : n_->attribute()) {
      Const c;
      if (a.name() == "value") {
        if (a.type() != onnx::AttributeProto::TENSOR) fail("attribute value must be a tensor");
        return decode(a.t(), node_label());
      } else if (a.name() == "value_float") {
        c.f = {a.f()};
      } else if (a.name() == "value_floats") {
        c.f.assign(a.floats().begin(), a.floats().end());
        c.dims = {static_cast<int64_t>(c.f.size())};
      } else if (a.name() == "value_int") {
        c.is_int = true;
        c.i = {a.i()};
      } else if (a.name() == "value_ints") {
        c.is_int = true;
        c.i.assign(a.ints().begin(), a.ints().end());
        c.dims = {static_cast<int64_t>(c.i.size())};
      } else {
        unsupported("attribute " + a.name());
      }
      return c;
    }
    fail("has no value");
  }

  // Add / Sub / Mul / Div of two constants with NumPy broadcasting: float weights, or int64 shape math
  // (integer division truncates, as ONNX Div on int64 does; the batch may not take part).
  Const fold_arith(const std::string& op) {
    const Const& x = *in(0).c;
    const Const& y = *in(1).c;
    if (x.is_int != y.is_int) unsupported("arithmetic between an integer and a float constant");
    const size_t rank = std::max(x.dims.size(), y.dims.size());
    Const c;
    c.is_int = x.is_int;
    c.dims.assign(rank, 1);
    std::vector<int64_t> sx(rank, 0), sy(rank, 0);
    int64_t stx = 1, sty = 1;
    for (size_t k = rank; k-- > 0;) {
      const size_t ox = rank - x.dims.size(), oy = rank - y.dims.size();
      const int64_t dx = k >= ox ? x.dims[k - ox] : 1, dy = k >= oy ? y.dims[k - oy] : 1;
      if (dx != dy && dx != 1 && dy != 1)
        fail("constants " + str_dims(x.dims) + " and " + str_dims(y.dims) + " do not broadcast");
      c.dims[k] = dx == 1 ? dy : dx;
      sx[k] = dx == 1 ? 0 : stx;
      sy[k] = dy == 1 ? 0 : sty;
      stx *= dx;
      sty *= dy;
    }
    const int64_t n = checked_numel(c.dims, node_label());
    const BinaryKind kind = arith_kind(op);
    std::vector<int64_t> idx(rank, 0);
    for (int64_t e = 0; e < n; ++e) {
      int64_t ix = 0, iy = 0;
      for (size_t k = 0; k < rank; ++k) ix += idx[k] * sx[k], iy += idx[k] * sy[k];
      if (c.is_int) {
        const int64_t a = x.i[static_cast<size_t>(ix)], b = y.i[static_cast<size_t>(iy)];
        if (a == kBatch || b == kBatch) unsupported("the batch dimension used in arithmetic");
        if (kind == BinaryKind::Div && b == 0) fail("integer division by zero");
        const auto wide = [&]() -> __int128 {
          switch (kind) {
            case BinaryKind::Add: return __int128(a) + b;
            case BinaryKind::Sub: return __int128(a) - b;
            case BinaryKind::Mul: return __int128(a) * b;
            case BinaryKind::Div: return __int128(a) / b;
          }
          return 0;
        }();
        if (wide > kMaxElements || wide < -kMaxElements) fail("integer result is out of range");
        c.i.push_back(static_cast<int64_t>(wide));
      } else {
        const float a = x.f[static_cast<size_t>(ix)], b = y.f[static_cast<size_t>(iy)];
        c.f.push_back(kind == BinaryKind::Add   ? a + b
                      : kind == BinaryKind::Sub ? a - b
                      : kind == BinaryKind::Mul ? a * b
                                                : a / b);
      }
      for (size_t k = rank; k-- > 0;) {
        if (++idx[k] < c.dims[k]) break;
        idx[k] = 0;
      }
    }
    return c;
  }

  // Reads an axes list from an attribute (older opsets) or input 1 (newer).
  std::vector<int64_t> axes_arg(int input) {
    if (has_input(input)) return ints(input).i;
    return attr_ints("axes", {});
  }

  Const fold() {
    const std::string& op = n_->op_type();
    if (op == "Shape") {
      Const c;
      c.is_int = true;
      const Val& v = in(0);
      Shape s = v.is_const() ? v.c->dims : b_.shape(v.id);
      if (!v.is_const() && !s.empty() && pinned_.empty()) s[0] = kBatch;  // pinned: the number itself
      const int64_t r = static_cast<int64_t>(s.size());
      int64_t start = attr_int("start", 0), end = attr_int("end", r);
      if (start < 0) start += r;
      if (end < 0) end += r;
      start = std::clamp<int64_t>(start, 0, r);
      end = std::clamp<int64_t>(end, 0, r);
      for (int64_t k = start; k < end; ++k) c.i.push_back(s[static_cast<size_t>(k)]);
      c.dims = {static_cast<int64_t>(c.i.size())};
      return c;
    }
    if (op == "Cast") {
      const Val& v = in(0);
      if (!v.is_const()) unsupported("Cast of a computed tensor");
      Const c = *v.c;
      const int64_t to = attr_int("to", 0);
      const bool to_int = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32;
      const bool to_float = to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE;
      if (!to_int && !to_float) unsupported("Cast to type " + std::to_string(to));
      if (to_int && !c.is_int) {
        for (float f : c.f) {
          if (!(std::fabs(f) < 9e18f)) fail("cannot cast " + std::to_string(f) + " to an integer");
          c.i.push_back(static_cast<int64_t>(f));
        }
        c.f.clear();
      } else if (to_float && c.is_int) {
        for (int64_t i : c.i) {
          if (i == kBatch) unsupported("the batch dimension used as a number");
          c.f.push_back(static_cast<float>(i));
        }
        c.i.clear();
      }
      c.is_int = to_int;
      return c;
    }
    if (op == "ConstantOfShape") {
      const Const& shape = ints(0);
      if (shape.dims.size() > 1) fail("input must be a 1-D shape");
      Const c;
      for (int64_t d : shape.i) {
        if (d == kBatch) unsupported("ConstantOfShape of a shape with the batch dimension");
        c.dims.push_back(d);
      }
      const int64_t n = checked_numel(c.dims, origin_ + ": " + node_label());
      Const value;  // default: one float 0
      value.f = {0.f};
      if (const onnx::AttributeProto* a = attr("value", onnx::AttributeProto::TENSOR))
        value = decode(a->t(), node_label() + " value");
      if (value.numel() != 1) fail("value must have one element");
      c.is_int = value.is_int;
      if (c.is_int) c.i.assign(static_cast<size_t>(n), value.i[0]);
      else c.f.assign(static_cast<size_t>(n), value.f[0]);
      return c;
    }
    // Everything below works on constant inputs only.
    for (int k = 0; k < n_->input_size(); ++k)
      if (has_input(k) && !in(k).is_const()) unsupported("input " + std::to_string(k) + " is not a constant");
    const Const& x = *in(0).c;
    if (op == "Gather") {
      const Const& idx = ints(1);
      if (x.dims.size() != 1 || norm_axis(attr_int("axis", 0), 1) != 0)
        unsupported("Gather of constants other than 1-D along axis 0");
      Const c;
      c.is_int = x.is_int;
      c.dims = idx.dims;
      const int64_t n = x.dims[0];
      for (int64_t i : idx.i) {
        if (i < -n || i >= n) fail("index " + std::to_string(i) + " is out of range");
        const size_t j = static_cast<size_t>(i < 0 ? i + n : i);
        if (x.is_int) c.i.push_back(x.i[j]); else c.f.push_back(x.f[j]);
      }
      return c;
    }
    if (op == "Unsqueeze") {
      Const c = x;
      const std::vector<int64_t> axes = axes_arg(1);
      const int r = static_cast<int>(x.dims.size() + axes.size());
      std::vector<int> sorted;
      for (int64_t a : axes) sorted.push_back(norm_axis(a, r));
      std::sort(sorted.begin(), sorted.end());
      for (int a : sorted) {
        if (a > static_cast<int>(c.dims.size())) fail("axes are invalid");
        c.dims.insert(c.dims.begin() + a, 1);
      }
      return c;
    }
    if (op == "Squeeze") {
      Const c = x;
      const std::vector<int64_t> axes = axes_arg(1);
      const int r = static_cast<int>(x.dims.size());
      std::vector<bool> drop(static_cast<size_t>(r), false);
      for (int64_t a : axes) drop[static_cast<size_t>(norm_axis(a, r))] = true;
      c.dims.clear();
      for (int d = 0; d < r; ++d) {
        const bool squeeze = axes.empty() ? x.dims[d] == 1 : drop[static_cast<size_t>(d)];
        if (squeeze && x.dims[d] != 1) fail("cannot squeeze a dimension of size " + std::to_string(x.dims[d]));
        if (!squeeze) c.dims.push_back(x.dims[d]);
      }
      return c;
    }
    if (op == "Concat") {
      Const c;
      c.is_int = x.is_int;
      for (int k = 0; k < n_->input_size(); ++k) {
        if (!has_input(k)) continue;
        const Const& p = *in(k).c;
        if (p.dims.size() != 1 || p.is_int != c.is_int) unsupported("Concat of constants other than 1-D of one type");
        c.i.insert(c.i.end(), p.i.begin(), p.i.end());
        c.f.insert(c.f.end(), p.f.begin(), p.f.end());
      }
      c.dims = {c.numel()};
      return c;
    }
    if (op == "Slice") {
      auto [starts, ends, axes, steps] = slice_args();
      for (const std::vector<int64_t>* v : {&starts, &ends, &steps})
        if (std::find(v->begin(), v->end(), kBatch) != v->end())
          unsupported("the batch dimension used as a Slice bound");
      const int r = static_cast<int>(x.dims.size());
      if (r == 0) fail("cannot slice a scalar");
      if (starts.size() != ends.size() || (!axes.empty() && axes.size() != starts.size()) ||
          (!steps.empty() && steps.size() != starts.size()))
        fail("starts, ends, axes and steps differ in length");
      // Per dimension: the first index, the step and the count taken (all of it when not sliced).
      std::vector<int64_t> first(static_cast<size_t>(r), 0), stride(static_cast<size_t>(r), 1),
          count(x.dims.begin(), x.dims.end());
      std::vector<bool> seen(static_cast<size_t>(r), false);
      for (size_t k = 0; k < starts.size(); ++k) {
        const int a = norm_axis(axes.empty() ? static_cast<int64_t>(k) : axes[k], r);
        if (seen[static_cast<size_t>(a)]) fail("axis " + std::to_string(a) + " is sliced twice");
        seen[static_cast<size_t>(a)] = true;
        const int64_t n = x.dims[static_cast<size_t>(a)];
        // A step beyond the length takes one element either way; clamping it keeps s + step in range.
        const int64_t step = std::clamp<int64_t>(steps.empty() ? 1 : steps[k], -(n + 1), n + 1);
        if (step == 0) fail("step 0");
        auto clampi = [&](int64_t v, int64_t lo, int64_t hi) {
          if (v < 0) v = v < -n ? lo : v + n;  // (v < -n also covers INT64_MIN without overflow)
          return std::clamp(v, lo, hi);
        };
        const int64_t b = step > 0 ? clampi(starts[k], 0, n) : clampi(starts[k], -1, n - 1);
        const int64_t e = step > 0 ? clampi(ends[k], 0, n) : clampi(ends[k], -1, n - 1);
        int64_t m = 0;
        if (step > 0 && e > b) m = (e - b + step - 1) / step;
        if (step < 0 && b > e) m = (b - e + (-step) - 1) / (-step);
        first[static_cast<size_t>(a)] = b;
        stride[static_cast<size_t>(a)] = step;
        count[static_cast<size_t>(a)] = m;
      }
      Const c;
      c.is_int = x.is_int;
      c.dims = count;
      const int64_t total = checked_numel(count, origin_ + ": " + node_label());
      std::vector<int64_t> idx(static_cast<size_t>(r), 0);
      for (int64_t t = 0; t < total; ++t) {
        int64_t src = 0;
        for (int d = 0; d < r; ++d)
          src = src * x.dims[static_cast<size_t>(d)] + first[static_cast<size_t>(d)] +
                idx[static_cast<size_t>(d)] * stride[static_cast<size_t>(d)];
        if (x.is_int) c.i.push_back(x.i[static_cast<size_t>(src)]); else c.f.push_back(x.f[static_cast<size_t>(src)]);
        for (int d = r - 1; d >= 0 && ++idx[static_cast<size_t>(d)] == count[static_cast<size_t>(d)]; --d)
          idx[static_cast<size_t>(d)] = 0;
      }
      return c;
    }
    if (op == "Transpose") {
      const int r = static_cast<int>(x.dims.size());
      std::vector<int64_t> perm = attr_ints("perm", {});
      if (perm.empty())
        for (int d = r - 1; d >= 0; --d) perm.push_back(d);
      if (static_cast<int>(perm.size()) != r) fail("perm " + str_dims(perm) + " does not match rank " + std::to_string(r));
      std::vector<bool> used(static_cast<size_t>(r), false);
      for (int64_t& p : perm) {
        p = norm_axis(p, r);
        if (used[static_cast<size_t>(p)]) fail("perm " + str_dims(perm) + " repeats an axis");
        used[static_cast<size_t>(p)] = true;
      }
      Const c;
      c.is_int = x.is_int;
      std::vector<int64_t> in_stride(static_cast<size_t>(r), 1);
      for (int d = r - 2; d >= 0; --d)
        in_stride[static_cast<size_t>(d)] = in_stride[static_cast<size_t>(d) + 1] * x.dims[static_cast<size_t>(d) + 1];
      for (int d = 0; d < r; ++d) c.dims.push_back(x.dims[static_cast<size_t>(perm[static_cast<size_t>(d)])]);
      std::vector<int64_t> idx(static_cast<size_t>(r), 0);
      for (int64_t t = 0; t < x.numel(); ++t) {
        int64_t src = 0;
        for (int d = 0; d < r; ++d) src += idx[static_cast<size_t>(d)] * in_stride[static_cast<size_t>(perm[static_cast<size_t>(d)])];
        if (x.is_int) c.i.push_back(x.i[static_cast<size_t>(src)]); else c.f.push_back(x.f[static_cast<size_t>(src)]);
        for (int d = r - 1; d >= 0 && ++idx[static_cast<size_t>(d)] == c.dims[static_cast<size_t>(d)]; --d)
          idx[static_cast<size_t>(d)] = 0;
      }
      return c;
    }
    if (op == "Reshape") {
      const Const& t = ints(1);
      Const c = x;
      Shape dims;
      int64_t known = 1;
      int unknown = -1;
      for (size_t k = 0; k < t.i.size(); ++k) {
        int64_t d = t.i[k];
        if (d == 0) d = k < x.dims.size() ? x.dims[k] : -2;
        if (d == -1 && unknown < 0) { unknown = static_cast<int>(k); dims.push_back(1); continue; }
        if (d < 1 || d > kMaxElements) fail("shape " + str_dims(t.i) + " is invalid");
        known *= d;
        if (known > kMaxElements) fail("shape " + str_dims(t.i) + " is too large");
        dims.push_back(d);
      }
      if (unknown >= 0) {
        if (known == 0 || x.numel() % known) fail("shape " + str_dims(t.i) + " does not fit");
        dims[static_cast<size_t>(unknown)] = x.numel() / known;
      } else if (known != x.numel()) {
        fail("shape " + str_dims(t.i) + " does not fit " + str_dims(x.dims));
      }
      c.dims = dims;
      return c;
    }
    if (is_arith(op)) return fold_arith(op);
    unsupported("folding");
  }

  const onnx::ModelProto& m_;
  std::string origin_, base_dir_;
  ImportOptions opt_;
  ModelBuilder b_;
  int64_t opset_ = -1;
  std::string pinned_;               // non-empty: the inputs keep their fixed batch, for this reason
  int64_t exported_batch_ = 0;       // the inputs' fixed leading size; 0 = symbolic (dynamic axis)
  std::string exported_batch_from_;  // the input that fixed it (for messages)
  std::map<std::string, Val> values_;
  std::set<std::string> used_;
  std::map<std::string, std::vector<int>> consumers_;
  std::set<std::string> graph_outputs_;
  std::set<int> skip_;
  std::map<int, Gate> gates_;  // gate node (Sigmoid / HardSigmoid) -> the activation it becomes
  std::set<int> gate_muls_;    // the Mul nodes of gates_
  struct PendingPad {
    Padding2D pad;
    std::string name;  // the Pad node's, for the pad2d node a Conv may still need
  };
  std::map<std::string, ChainStage> chain_;  // the views of Reshape -> Transpose -> Reshape chains
  std::map<std::string, PendingPad> pending_pad_;  // zero Pads merged into the Conv / AveragePool after them
};

ModelBuilder import_impl(const std::vector<uint8_t>& bytes, const std::string& origin,
                         const std::string& base_dir, const ImportOptions& options,
                         const std::string& default_name) {
  if (bytes.size() > kMaxFileBytes) throw Error(origin + ": larger than 2 GiB");
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw Error(origin + ": not a valid ONNX model (protobuf parse failed)");
  if (!model.has_graph()) throw Error(origin + ": the ONNX model has no graph");
  // A fixed export batch becomes -1 unless the importer cannot tell it from another number: then the
  // model is converted again with the inputs kept at that batch, and the reason goes into its
  // `batch.fixed` metadata, which a session at another batch quotes.
  try {
    return Importer(model, origin, base_dir, options, default_name).run();
  } catch (const PinBatch& pin) {
    return Importer(model, origin, base_dir, options, default_name, pin.reason).run();
  }
}

}  // namespace

const std::vector<std::string>& supported_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const auto& entry : Importer::converters()) names.push_back(entry.first);  // sorted: a std::map
    return names;
  }();
  return ops;
}

ModelBuilder import_bytes(const std::vector<uint8_t>& bytes, const std::string& origin,
                          const std::string& base_dir, const ImportOptions& options) {
  return import_impl(bytes, origin, base_dir, options, "");
}

ModelBuilder import_file(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error("cannot read '" + path + "': " + ec.message());
  if (size > kMaxFileBytes) throw Error(path + ": larger than 2 GiB");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  std::ifstream f(path, std::ios::binary);
  if (!f || !f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    throw Error("cannot read '" + path + "'");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  return import_impl(bytes, path, dir.string(), options, fs::path(path).stem().string());
}

}  // namespace infer::onnx_import
