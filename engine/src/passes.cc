// Graph passes (see passes.h and docs/kernels.md "Graph passes"). Every fusion merges a consumer node
// into the node producing its data input, and only when that intermediate value has exactly one reader
// and is not a graph output: the producer then writes the consumer's output value directly, so the
// order stays topological (the consumer's readers all come after the producer) and graph outputs keep
// their names. Removed nodes and values no node uses are compacted away, ids remapped.
#include "passes.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "engine/ops/op_def.h"
#include "infer/error.h"
#include "shape_inference.h"

namespace infer {

// --- PassOptions (declared in the public session.h) -------------------------------------------------

namespace {

// Every pass once: its --pass name and its switch (names(), set(), set_all() and enabled() read this).
struct PassSwitch {
  const char* name;
  bool PassOptions::*flag;
};
constexpr PassSwitch kPassSwitches[] = {
    {"fold_batchnorm", &PassOptions::fold_batchnorm},
    {"fuse_conv_avgpool", &PassOptions::fuse_conv_avgpool},
    {"fuse_activation", &PassOptions::fuse_activation},
    {"channels_last", &PassOptions::channels_last},
    {"fold_width", &PassOptions::fold_width},
    {"fuse_conv_residual", &PassOptions::fuse_conv_residual},
    {"fuse_squeeze_excite", &PassOptions::fuse_squeeze_excite},
    {"fuse_prelu", &PassOptions::fuse_prelu},
    {"fuse_depthwise_pointwise", &PassOptions::fuse_depthwise_pointwise},
    {"fuse_quantized_conv2d", &PassOptions::fuse_quantized_conv2d},
    {"fuse_input_epilogue", &PassOptions::fuse_input_epilogue},
    {"quantized_activations", &PassOptions::quantized_activations},
    {"fuse_quantized_add", &PassOptions::fuse_quantized_add},
};

const PassSwitch* find_pass(const std::string& name) {
  for (const PassSwitch& s : kPassSwitches)
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace

const std::vector<std::string>& PassOptions::names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const PassSwitch& s : kPassSwitches) names.emplace_back(s.name);
    return names;
  }();
  return kNames;
}

void PassOptions::set(const std::string& name, bool on) {
  const PassSwitch* s = find_pass(name);
  if (!s) {
    std::string known;
    for (const std::string& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown graph pass '" + name + "' (passes: " + known + ")");
  }
  this->*(s->flag) = on;
}

void PassOptions::set_all(bool on) {
  for (const PassSwitch& s : kPassSwitches) this->*(s.flag) = on;
}

void PassOptions::apply(const std::string& choice) {
  const size_t eq = choice.find('=');
  const std::string state = eq == std::string::npos ? "" : choice.substr(eq + 1);
  if (state != "off" && state != "on")
    throw Error("expected NAME=off or NAME=on, got '" + choice + "'");
  set(choice.substr(0, eq), state == "on");
}

bool PassOptions::enabled(const std::string& name) const {
  const PassSwitch* s = find_pass(name);
  return s && this->*(s->flag);
}

namespace detail {
namespace {

// Who reads and writes each value, kept current while a pass merges nodes.
struct Uses {
  std::vector<int> readers;   // number of node inputs naming the value (a node reading it twice counts 2)
  std::vector<int> producer;  // node index writing the value, -1 for none
  std::vector<bool> is_output;

  explicit Uses(const Graph& g)
      : readers(g.values.size(), 0), producer(g.values.size(), -1), is_output(g.values.size(), false) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int id : g.nodes[i].inputs) ++readers.at(static_cast<size_t>(id));
      for (int id : g.nodes[i].outputs) producer.at(static_cast<size_t>(id)) = static_cast<int>(i);
    }
    for (int id : g.outputs) is_output.at(static_cast<size_t>(id)) = true;
  }

  // The node producing `consumer`'s data input when that value may be fused away (its only reader is
  // `consumer` and it is not a graph output), else -1.
  int fusable_producer(const Node& consumer) const {
    if (consumer.inputs.empty()) return -1;
    const auto x = static_cast<size_t>(consumer.inputs[0]);
    if (readers[x] != 1 || is_output[x]) return -1;
    return producer[x];
  }
};

}  // namespace

Activation* epilogue(OpParams& p) {
  if (auto* c = std::get_if<Conv2DParams>(&p)) return &c->activation;
  if (auto* c = std::get_if<ConvTranspose2DParams>(&p)) return &c->activation;
  if (auto* c = std::get_if<DenseParams>(&p)) return &c->activation;
  if (auto* c = std::get_if<BatchNormParams>(&p)) return &c->activation;
  if (auto* c = std::get_if<AddParams>(&p)) return &c->activation;
  if (auto* c = std::get_if<ConvPool2DParams>(&p)) return &c->conv.activation;
  if (auto* c = std::get_if<BinaryParams>(&p)) return &c->activation;
  if (auto* c = std::get_if<InstanceNormParams>(&p)) return &c->activation;
  return nullptr;
}

namespace {

bool has_no_activation(OpParams& p) {
  const Activation* a = epilogue(p);
  return a && a->kind == ActivationKind::None;
}

// Node `c` disappears into node `p`: p now writes c's output and lists c (and what c had absorbed).
void merge(Graph& g, Uses& uses, size_t p, size_t c, std::vector<bool>& removed) {
  Node& producer = g.nodes[p];
  Node& consumer = g.nodes[c];
  const int out = consumer.outputs.at(0);
  producer.outputs.at(0) = out;
  uses.producer[static_cast<size_t>(out)] = static_cast<int>(p);
  producer.fused.push_back(consumer.name);
  producer.fused.insert(producer.fused.end(), consumer.fused.begin(), consumer.fused.end());
  removed[c] = true;
}

// Drops removed nodes and every value that is no longer a graph input/output nor named by a node,
// remapping ids so that nothing dangles.
void compact(Graph& g, const std::vector<bool>& removed) {
  std::vector<Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed[i]) nodes.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(nodes);

  std::vector<bool> used(g.values.size(), false);
  for (int id : g.inputs) used.at(static_cast<size_t>(id)) = true;
  for (int id : g.outputs) used.at(static_cast<size_t>(id)) = true;
  for (const Node& n : g.nodes) {
    for (int id : n.inputs) used.at(static_cast<size_t>(id)) = true;
    for (int id : n.outputs) used.at(static_cast<size_t>(id)) = true;
  }
  // A kept dequantized constant keeps its integer source, scale and zero point (fuse_quantized_conv2d
  // reads them), their ids remapped below.
  for (size_t id = 0; id < g.values.size(); ++id)
    if (used[id] && g.values[id].dequantized)
      for (int src : {g.values[id].dequantized->source, g.values[id].dequantized->scale,
                      g.values[id].dequantized->zero_point})
        if (src >= 0) used.at(static_cast<size_t>(src)) = true;
  std::vector<int> remap(g.values.size(), -1);
  std::vector<Value> values;
  for (size_t id = 0; id < g.values.size(); ++id) {
    if (!used[id]) continue;
    remap[id] = static_cast<int>(values.size());
    values.push_back(std::move(g.values[id]));
  }
  g.values = std::move(values);
  auto fix = [&](std::vector<int>& ids) {
    for (int& id : ids) id = remap[static_cast<size_t>(id)];
  };
  fix(g.inputs);
  fix(g.outputs);
  for (Node& n : g.nodes) {
    fix(n.inputs);
    fix(n.outputs);
  }
  for (Value& v : g.values)
    if (v.dequantized)
      for (int* src : {&v.dequantized->source, &v.dequantized->scale, &v.dequantized->zero_point})
        if (*src >= 0) *src = remap[static_cast<size_t>(*src)];
}

// "3 BatchNorm nodes folded into conv2d (2), dense (1)" style counts, in first-seen order.
struct Tally {
  std::vector<std::pair<std::string, int>> by_op;
  int total = 0;

  void add(const std::string& op) {
    ++total;
    for (auto& [name, count] : by_op)
      if (name == op) {
        ++count;
        return;
      }
    by_op.emplace_back(op, 1);
  }
  std::string into() const {
    if (by_op.size() == 1) return by_op[0].first;
    std::string out;
    for (const auto& [name, count] : by_op)
      out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", name, count);
    return out;
  }
};

const char* plural(int n, const char* one, const char* many) { return n == 1 ? one : many; }

const Value& value(const Graph& g, int id) { return g.values.at(static_cast<size_t>(id)); }
const Shape& value_shape(const Graph& g, int id) { return value(g, id).shape; }

// A zero bias of `channels` values for the node `node_name`, added as a graph constant named
// "<node_name>.zero_bias"; returns its id. Grows g.values (ids stay valid).
int zero_bias_channels(Graph& g, const std::string& node_name, int64_t channels) {
  return g.add_constant(node_name + ".zero_bias", Shape{channels},
                        std::vector<float>(static_cast<size_t>(channels), 0.f));
}
// The same for a conv whose weight is value `weight` ([C_out, ...]).
int zero_bias(Graph& g, const std::string& conv_name, int weight) {
  return zero_bias_channels(g, conv_name, value_shape(g, weight).at(0));
}

// A constant of int8 values (held as floats, as the loader widens an i8 constant); returns its id.
// Grows g.values (ids stay valid).
int add_int8_constant(Graph& g, const std::string& name, Shape shape, std::vector<float> data) {
  const int id = g.add_constant(name, std::move(shape), std::move(data));
  g.values.back().dtype = DType::I8;
  return id;
}

}  // namespace

// --- fold_batchnorm -----------------------------------------------------------------------------------
// y = (conv(x) + b - mean) * s + beta with s = scale / sqrt(var + eps) per output channel, which is
// conv with weights W * s (per output channel) and bias (b - mean) * s + beta. Computed in double,
// stored as float32 constants owned by the graph. A weight dequantized at load from int8 (zero point 0,
// per tensor or per output channel, groups 1: a QDQ model quantized before its BatchNorm was folded,
// as `infer quantize` writes a generator) stays int8: the integers negated where s < 0 and the scale
// per channel |s| times the old one, so fuse_quantized_conv2d still finds an int8 weight, and the
// folded float weight is exactly those integers times those scales.
namespace {
// The int8 source of weight w dequantized at load with zero point 0, per tensor or per output channel
// (w's axis `out_axis`), or nullopt: the weights fold_batchnorm keeps in int8 and fuse_quantized_conv2d
// fuses.
std::optional<Value::Dequantized> int8_source(const Graph& g, const Value& w, int out_axis) {
  if (!w.dequantized || w.shape.size() < 2) return std::nullopt;
  const Value::Dequantized wd = *w.dequantized;
  const Value& src = value(g, wd.source);
  if (src.dtype != DType::I8 || src.shape != w.shape) return std::nullopt;
  const int64_t scales = shape_numel(value(g, wd.scale).shape);
  const int rank = static_cast<int>(w.shape.size());
  if (scales != 1 && !(scales == w.shape[size_t(out_axis)] && (wd.axis == out_axis || wd.axis == out_axis - rank)))
    return std::nullopt;
  if (wd.zero_point >= 0) {
    const Value& wz = value(g, wd.zero_point);
    if (!std::all_of(wz.data, wz.data + shape_numel(wz.shape), [](float v) { return v == 0.f; })) return std::nullopt;
  }
  return wd;
}
}  // namespace

Graph fold_batchnorm(Graph g, std::vector<std::string>* log) {
  Uses uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  Tally tally;
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const Node& bn = g.nodes[c];
    if (bn.op() != OpType::BatchNorm || bn.inputs.size() != 5) continue;
    const int p_index = uses.fusable_producer(bn);
    if (p_index < 0) continue;
    const auto p = static_cast<size_t>(p_index);
    Node& prod = g.nodes[p];
    const OpType op = prod.op();
    if (op != OpType::Conv2D && op != OpType::ConvTranspose2D && op != OpType::Dense) continue;
    if (!has_no_activation(prod.params) || prod.inputs.size() < 2 || prod.inputs.size() > 3) continue;

    // Weight layout: conv [C_out, C_in/groups, KH, KW] and dense [F_out, F_in] have the output
    // channel outermost; tconv [C_in, C_out/groups, KH, KW] has it second, and with groups the
    // output channel of w[ci][c] is (ci / (C_in/groups)) * (C_out/groups) + c.
    const Value& w = value(g, prod.inputs[1]);
    if (!w.is_constant() || w.shape.size() < 2) continue;
    const bool tconv = op == OpType::ConvTranspose2D;
    const int64_t groups = tconv ? std::get<ConvTranspose2DParams>(prod.params).groups : 1;
    const int64_t outer = tconv ? w.shape[0] : 1;
    const int64_t per_group = tconv ? w.shape[1] : w.shape[0];  // output channels in w's dim
    if (groups < 1 || outer % groups != 0) continue;  // malformed: shape inference reports it
    const int64_t channels = per_group * groups;
    const int64_t inner = shape_numel(w.shape) / (outer * per_group);

    const float* params[4];  // BN scale, bias, mean, var
    bool ok = true;
    for (int k = 0; k < 4; ++k) {
      const Value& v = value(g, bn.inputs[static_cast<size_t>(k) + 1]);
      ok = ok && v.is_constant() && shape_numel(v.shape) == channels;
      params[k] = v.data;
    }
    const float* old_bias = nullptr;
    if (prod.inputs.size() == 3) {
      const Value& b = value(g, prod.inputs[2]);
      ok = ok && b.is_constant() && shape_numel(b.shape) == channels;
      old_bias = b.data;
    }
    if (!ok) continue;  // malformed for folding; leave it to shape inference to report

    const auto& bnp = std::get<BatchNormParams>(bn.params);
    std::vector<double> s(static_cast<size_t>(channels));
    std::vector<float> bias(static_cast<size_t>(channels));
    for (int64_t ch = 0; ch < channels; ++ch) {
      const double sc = double(params[0][ch]) / std::sqrt(double(params[3][ch]) + double(bnp.epsilon));
      const double b = old_bias ? old_bias[ch] : 0.0;
      s[static_cast<size_t>(ch)] = sc;
      bias[static_cast<size_t>(ch)] = float((b - double(params[2][ch])) * sc + double(params[1][ch]));
    }
    std::vector<float> weight(static_cast<size_t>(shape_numel(w.shape)));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t ch = 0; ch < per_group; ++ch) {
        const int64_t out_ch = (o / (outer / groups)) * per_group + ch;
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t at = (o * per_group + ch) * inner + i;
          weight[static_cast<size_t>(at)] = float(double(w.data[at]) * s[static_cast<size_t>(out_ch)]);
        }
      }

    // A weight dequantized at load from int8 keeps its integers: the factor goes into its scales.
    std::optional<Value::Dequantized> int8 = groups == 1 ? int8_source(g, w, tconv ? 1 : 0) : std::nullopt;
    if (int8) {  // -128 has no negation in int8: such a weight folds in float
      const Value& src = value(g, int8->source);
      if (std::any_of(src.data, src.data + shape_numel(src.shape), [](float v) { return v < -127.f; }))
        int8.reset();
    }
    std::vector<float> q, q_scale;
    if (int8) {
      const float* src = value(g, int8->source).data;
      const Value& sc = value(g, int8->scale);
      const bool per_channel = shape_numel(sc.shape) != 1;
      q.resize(weight.size());
      q_scale.resize(static_cast<size_t>(channels));
      for (int64_t ch = 0; ch < channels; ++ch)
        q_scale[size_t(ch)] = float(double(sc.data[per_channel ? ch : 0]) * std::abs(s[size_t(ch)]));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t ch = 0; ch < per_group; ++ch)
          for (int64_t i = 0; i < inner; ++i) {
            const int64_t at = (o * per_group + ch) * inner + i;
            const float v = s[size_t(ch)] < 0 ? -src[at] : src[at];  // |q| <= 127 for the negation to stay int8
            q[size_t(at)] = v;
            weight[size_t(at)] = v * q_scale[size_t(ch)];  // as the loader dequantizes: float(q) * scale
          }
    }

    // add_constant grows g.values, so `w` must not be used past this point.
    const Shape w_shape = w.shape;
    const int w_id = g.add_constant(bn.name + ".folded_weight", w_shape, std::move(weight));
    const int b_id = g.add_constant(bn.name + ".folded_bias", Shape{channels}, std::move(bias));
    if (int8) {
      const int q_id = add_int8_constant(g, bn.name + ".folded_weight_q", w_shape, std::move(q));
      const int s_id = g.add_constant(bn.name + ".folded_weight_scale", Shape{channels}, std::move(q_scale));
      g.values[size_t(w_id)].dequantized = Value::Dequantized{q_id, s_id, -1, tconv ? 1 : 0};
    }
    uses.readers.resize(g.values.size(), 1);  // constants: never a fusable data input
    uses.producer.resize(g.values.size(), -1);
    uses.is_output.resize(g.values.size(), false);
    prod.inputs.resize(3);
    prod.inputs[1] = w_id;
    prod.inputs[2] = b_id;
    *epilogue(prod.params) = bnp.activation;  // the BN's activation moves to the producer
    tally.add(op_name(op));
    merge(g, uses, p, c, removed);
  }
  if (tally.total) compact(g, removed);
  if (log)
    log->push_back(tally.total ? fmt::format("fold_batchnorm: {} BatchNorm {} folded into {}",
                                             tally.total, plural(tally.total, "node", "nodes"),
                                             tally.into())
                               : "fold_batchnorm: no BatchNorm to fold");
  return g;
}

// --- fuse_conv_avgpool --------------------------------------------------------------------------------
// conv (no activation) -> p x p average pool at stride p without padding is linear end to end, so it
// becomes one ConvPool2D{conv, p} (conv_pool2d kernels: unfused, fused_filter, direct_sum). A square,
// unpadded window equal to its stride is exactly what ConvPool2D computes (output floor(H/p)).
Graph fuse_conv_avgpool(Graph g, std::vector<std::string>* log) {
  Uses uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  int count = 0;
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const Node& pool = g.nodes[c];
    if (pool.op() != OpType::Pool2D) continue;
    const auto& pp = std::get<Pool2DParams>(pool.params);
    const int k = pp.kernel_h;
    const bool square = pp.kind == PoolKind::Average && k >= 1 && pp.kernel_w == k &&
                        pp.stride_h == k && pp.stride_w == k;
    const bool unpadded = pp.pad.top == 0 && pp.pad.left == 0 && pp.pad.bottom == 0 &&
                          pp.pad.right == 0 && !pp.ceil_mode;  // ceil_mode may add a partial window
    if (!square || !unpadded) continue;
    const int p = uses.fusable_producer(pool);
    if (p < 0) continue;
    Node& conv = g.nodes[static_cast<size_t>(p)];
    if (conv.op() != OpType::Conv2D || !has_no_activation(conv.params)) continue;
    const auto& cp = std::get<Conv2DParams>(conv.params);  // conv_pool2d: groups and dilation 1 only
    if (cp.groups != 1 || cp.dilation_h != 1 || cp.dilation_w != 1) continue;
    conv.params = ConvPool2DParams{std::get<Conv2DParams>(conv.params), k};
    merge(g, uses, static_cast<size_t>(p), c, removed);
    ++count;
  }
  if (count) compact(g, removed);
  if (log)
    log->push_back(count ? fmt::format("fuse_conv_avgpool: {} conv2d + average pool {} rewritten "
                                       "into conv_pool2d",
                                       count, plural(count, "pair", "pairs"))
                         : "fuse_conv_avgpool: no conv2d + average pool pair to rewrite");
  return g;
}

// --- fuse_activation ----------------------------------------------------------------------------------
// An Activation node (or a PRelu with one slope) becomes its producer's epilogue (applied to each
// output element as it is written), saving one pass over the tensor and its memory.
// A PRelu whose slopes are all one finite value is a LeakyRelu with that slope (the same select
// x < 0 ? a * x : x in every kernel), which every epilogue has; a per-channel one is fuse_prelu's.
std::optional<Activation> as_leaky_relu(const Graph& g, const Node& prelu) {
  const Value& slope = g.values.at(static_cast<size_t>(prelu.inputs.at(1)));
  if (!slope.is_constant()) return std::nullopt;
  const int64_t n = shape_numel(slope.shape);
  if (n < 1 || !std::isfinite(slope.data[0])) return std::nullopt;
  for (int64_t i = 1; i < n; ++i)
    if (slope.data[i] != slope.data[0]) return std::nullopt;
  return Activation{ActivationKind::LeakyRelu, slope.data[0], 0.f};
}

Graph fuse_activation(Graph g, std::vector<std::string>* log) {
  Uses uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  Tally tally;
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const Node& act = g.nodes[c];
    std::optional<Activation> a;
    if (act.op() == OpType::Activation) a = std::get<ActivationParams>(act.params).activation;
    else if (act.op() == OpType::PRelu) a = as_leaky_relu(g, act);
    if (!a) continue;
    const int p = uses.fusable_producer(act);
    if (p < 0) continue;
    Node& prod = g.nodes[static_cast<size_t>(p)];
    if (!has_no_activation(prod.params)) continue;
    *epilogue(prod.params) = *a;
    tally.add(op_name(prod.op()));
    merge(g, uses, static_cast<size_t>(p), c, removed);
  }
  if (tally.total) compact(g, removed);
  if (log)
    log->push_back(tally.total ? fmt::format("fuse_activation: {} activation {} fused into {}",
                                             tally.total, plural(tally.total, "node", "nodes"),
                                             tally.into())
                               : "fuse_activation: no activation to fuse");
  return g;
}

// --- fuse_conv_residual -------------------------------------------------------------------------------
// add(conv(x), r) -> conv(x) with r as its residual input (Conv2DParams::add_residual), when the conv
// has no activation of its own and only the add reads it, and r is an activation of the add's shape.
// The merged node takes the add's place in execution order (r may be computed after the conv; the
// conv's inputs all exist earlier), its output and activation, and the conv's name; a conv without
// bias gets a zero one so that the residual is always input 3 (no kernel can mistake it for a bias).
Graph fuse_conv_residual(Graph g, const ResidualPredicate& takes, std::vector<std::string>* log) {
  Uses uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  int count = 0;
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    Node& add = g.nodes[c];
    Activation act;
    if (auto* a = std::get_if<AddParams>(&add.params)) {
      act = a->activation;
    } else if (auto* b = std::get_if<BinaryParams>(&add.params); b && b->kind == BinaryKind::Add) {
      act = b->activation;
    } else {
      continue;
    }
    if (add.inputs.size() != 2) continue;
    const Shape& out_shape = g.values.at(static_cast<size_t>(add.outputs.at(0))).shape;
    for (size_t k = 0; k < 2; ++k) {
      const auto conv_out = static_cast<size_t>(add.inputs[k]);
      const auto r = static_cast<size_t>(add.inputs[1 - k]);
      if (conv_out == r || uses.readers[conv_out] != 1 || uses.is_output[conv_out]) continue;
      const int p = uses.producer[conv_out];
      if (p < 0 || removed[static_cast<size_t>(p)]) continue;
      Node& conv = g.nodes[static_cast<size_t>(p)];
      const auto* cp = std::get_if<Conv2DParams>(&conv.params);
      if (!cp || cp->add_residual || cp->activation.kind != ActivationKind::None) continue;
      if (g.values[r].is_constant() || g.values[r].shape != out_shape ||
          g.values[conv_out].shape != out_shape)
        continue;
      if (takes && !takes(g, conv, static_cast<int>(r), act)) continue;
      Node merged = conv;
      auto& mp = std::get<Conv2DParams>(merged.params);
      mp.add_residual = true;
      mp.activation = act;
      // add_constant grows g.values: no value references are held past this point.
      if (merged.inputs.size() == 2) merged.inputs.push_back(zero_bias(g, conv.name, merged.inputs[1]));
      merged.inputs.push_back(static_cast<int>(r));
      merged.outputs = g.nodes[c].outputs;
      merged.fused.push_back(g.nodes[c].name);
      merged.fused.insert(merged.fused.end(), g.nodes[c].fused.begin(), g.nodes[c].fused.end());
      removed[static_cast<size_t>(p)] = true;
      g.nodes[c] = std::move(merged);
      uses.producer[static_cast<size_t>(g.nodes[c].outputs[0])] = static_cast<int>(c);
      ++count;
      break;
    }
  }
  if (count) compact(g, removed);
  if (log)
    log->push_back(count ? fmt::format("fuse_conv_residual: {} conv2d + residual add {} fused",
                                       count, plural(count, "pair", "pairs"))
                         : "fuse_conv_residual: no conv2d + residual add to fuse");
  return g;
}

// --- fuse_input_epilogue ------------------------------------------------------------------------------
// P -> C with P a conv_transpose2d or plain conv2d and C a conv2d (passes.h): P's bias and activation
// become C's input epilogue. Nodes keep their places and names; no node is removed.
Graph fuse_input_epilogue(Graph g, const InputEpiloguePredicate& takes, std::vector<std::string>* log) {
  const Uses uses(g);
  int count = 0;
  std::string names;
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const auto* cp = std::get_if<Conv2DParams>(&g.nodes[c].params);
    if (!cp || cp->add_residual || cp->input_epilogue || cp->activation.kind == ActivationKind::PRelu ||
        g.nodes[c].inputs.size() < 2 || g.nodes[c].inputs.size() > 3)
      continue;
    const int p = uses.fusable_producer(g.nodes[c]);
    if (p < 0) continue;
    const Node& prod = g.nodes[static_cast<size_t>(p)];
    Activation act;
    if (const auto* t = std::get_if<ConvTranspose2DParams>(&prod.params)) {
      act = t->activation;
    } else if (const auto* q = std::get_if<Conv2DParams>(&prod.params);
               q && !q->add_residual && !q->input_epilogue) {
      act = q->activation;
    } else {
      continue;
    }
    if (act.kind == ActivationKind::PRelu || prod.inputs.size() < 2 || prod.inputs.size() > 3) continue;
    if (prod.inputs.size() == 3 && !value(g, prod.inputs[2]).is_constant()) continue;
    if (prod.inputs.size() == 2 && act.kind == ActivationKind::None) continue;  // nothing to move
    Node bare = prod;
    *epilogue(bare.params) = Activation{};
    bare.inputs.resize(2);
    Node merged = g.nodes[c];
    auto& mp = std::get<Conv2DParams>(merged.params);
    mp.input_epilogue = true;
    mp.input_activation = act;
    if (takes && !takes(g, merged, bare)) continue;
    // add_constant grows g.values: no value references are held past this point.
    if (merged.inputs.size() == 2) merged.inputs.push_back(zero_bias(g, merged.name, merged.inputs[1]));
    if (prod.inputs.size() == 3) {
      merged.inputs.push_back(prod.inputs[2]);
    } else {
      const int64_t channels = value_shape(g, merged.inputs[1]).at(1) * std::max(mp.groups, 1);
      merged.inputs.push_back(zero_bias_channels(g, prod.name, channels));
    }
    names += (count ? ", " : "") + prod.name + " -> " + merged.name;
    g.nodes[static_cast<size_t>(p)] = std::move(bare);
    g.nodes[c] = std::move(merged);
    ++count;
  }
  if (log)
    log->push_back(count ? fmt::format("fuse_input_epilogue: {} bias + activation {} moved into the "
                                       "reading conv2d ({})",
                                       count, plural(count, "epilogue", "epilogues"), names)
                         : "fuse_input_epilogue: no producer epilogue to move into a conv2d");
  return g;
}

// --- fuse_squeeze_excite ------------------------------------------------------------------------------
// The squeeze-excitation block as exporters write it (torchvision's SqueezeExcitation: EfficientNet,
// MobileNetV3, RegNet): s = global average pool(x); g = act2(conv1x1(act1(conv1x1(s)))); y = x * g
// (a binary mul, either operand order, g broadcast over H and W). The four nodes become one
// squeeze_excite node at the multiply's place, named after the pool; every intermediate value must have
// its one reader in the chain and not be a graph output. A conv without bias gets a zero one.
namespace {

// The 1x1 convolution of a squeeze-excitation block producing `value`: its only reader is the next
// step, a 1x1 input map, no padding, groups or residual (stride and dilation do not matter on a 1x1
// map); returns its node index or -1.
int se_conv(const Graph& g, const Uses& uses, int value, const std::vector<bool>& removed) {
  const auto v = static_cast<size_t>(value);
  if (uses.readers[v] != 1 || uses.is_output[v]) return -1;
  const int p = uses.producer[v];
  if (p < 0 || removed[static_cast<size_t>(p)]) return -1;
  const Node& n = g.nodes[static_cast<size_t>(p)];
  const auto* cp = std::get_if<Conv2DParams>(&n.params);
  if (!cp || cp->add_residual || cp->groups != 1 || cp->pad.top || cp->pad.left || cp->pad.bottom ||
      cp->pad.right)
    return -1;
  const Shape& w = value_shape(g, n.inputs.at(1));
  const Shape& x = value_shape(g, n.inputs.at(0));
  if (w.size() != 4 || w[2] != 1 || w[3] != 1 || x.size() != 4 || x[2] != 1 || x[3] != 1) return -1;
  return p;
}

}  // namespace

Graph fuse_squeeze_excite(Graph g, const SqueezeExcitePredicate& takes, std::vector<std::string>* log) {
  Uses uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  int count = 0;
  bool added = false;  // zero biases added for a block takes then refused: compacted away below
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const Node& mul = g.nodes[c];
    const auto* bp = std::get_if<BinaryParams>(&mul.params);
    if (!bp || bp->kind != BinaryKind::Mul || mul.inputs.size() != 2) continue;
    for (size_t k = 0; k < 2; ++k) {
      const int x = mul.inputs[1 - k], gate = mul.inputs[k];
      const Shape& xs = value_shape(g, x);
      if (x == gate || g.values[static_cast<size_t>(x)].is_constant() || xs.size() != 4 ||
          value_shape(g, mul.outputs.at(0)) != xs)
        continue;
      const int fc2 = se_conv(g, uses, gate, removed);
      if (fc2 < 0) continue;
      const int fc1 = se_conv(g, uses, g.nodes[static_cast<size_t>(fc2)].inputs[0], removed);
      if (fc1 < 0) continue;
      const auto squeezed = static_cast<size_t>(g.nodes[static_cast<size_t>(fc1)].inputs[0]);
      if (uses.readers[squeezed] != 1 || uses.is_output[squeezed]) continue;
      const int pool = uses.producer[squeezed];
      if (pool < 0 || removed[static_cast<size_t>(pool)]) continue;
      const Node& pn = g.nodes[static_cast<size_t>(pool)];
      const auto* pp = std::get_if<Pool2DParams>(&pn.params);
      if (!pp || pp->kind != PoolKind::Average || pn.inputs.at(0) != x || pp->kernel_h != xs[2] ||
          pp->kernel_w != xs[3] || pp->pad.top || pp->pad.left || pp->pad.bottom || pp->pad.right)
        continue;
      const Node& n1 = g.nodes[static_cast<size_t>(fc1)];
      const Node& n2 = g.nodes[static_cast<size_t>(fc2)];
      if (value_shape(g, n1.inputs[1]).at(1) != xs[1] || value_shape(g, n2.inputs[1]).at(0) != xs[1]) continue;
      Node se;
      se.name = pn.name;
      se.params = SqueezeExciteParams{std::get<Conv2DParams>(n1.params).activation,
                                      std::get<Conv2DParams>(n2.params).activation, bp->activation};
      se.layout = mul.layout;
      se.outputs = mul.outputs;
      for (const Node* n : {&pn, &n1, &n2, &mul}) {
        if (n != &pn) se.fused.push_back(n->name);
        se.fused.insert(se.fused.end(), n->fused.begin(), n->fused.end());
      }
      // add_constant grows g.values: the inputs are gathered as ids before any is added.
      const int w1 = n1.inputs[1], w2 = n2.inputs[1];
      const int b1 = n1.inputs.size() > 2 ? n1.inputs[2] : -1, b2 = n2.inputs.size() > 2 ? n2.inputs[2] : -1;
      const std::string n1_name = n1.name, n2_name = n2.name;
      auto bias_or_zero = [&](int b, int w, const std::string& name) {
        if (b >= 0) return b;
        added = true;
        return zero_bias(g, name, w);
      };
      se.inputs = {x, w1, bias_or_zero(b1, w1, n1_name), w2, bias_or_zero(b2, w2, n2_name)};
      if (takes && !takes(g, se)) break;
      removed[static_cast<size_t>(pool)] = removed[static_cast<size_t>(fc1)] =
          removed[static_cast<size_t>(fc2)] = true;
      g.nodes[c] = std::move(se);
      ++count;
      break;
    }
  }
  if (count || added) compact(g, removed);
  if (log)
    log->push_back(count ? fmt::format("fuse_squeeze_excite: {} squeeze-excitation {} (global average "
                                       "pool, two 1x1 conv2d, mul) fused",
                                       count, plural(count, "block", "blocks"))
                         : "fuse_squeeze_excite: no squeeze-excitation block to fuse");
  return g;
}

// --- fuse_prelu ---------------------------------------------------------------------------------------
// prelu(producer(x), slope [C]) -> producer with ActivationKind::PRelu and the slope as its last input,
// for a conv2d (no residual), conv_transpose2d or dense (OpDef::prelu_epilogue) without an activation
// of its own. The merged node always has a bias (a zero one added) so the slope is input 3 and no
// kernel can take it for a bias. Per channel: epilogue c is LeakyRelu(slope[c]), the select the prelu
// kernels compute, so the values stay those of the two nodes up to the producer's own rounding.
Graph fuse_prelu(Graph g, const PReluPredicate& takes, std::vector<std::string>* log) {
  Uses uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  Tally tally;
  bool added = false;  // zero biases added for a node takes then refused: compacted away below
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const Node& prelu = g.nodes[c];
    if (prelu.op() != OpType::PRelu || prelu.inputs.size() != 2) continue;
    const int p = uses.fusable_producer(prelu);
    if (p < 0 || removed[static_cast<size_t>(p)]) continue;
    const Node& prod = g.nodes[static_cast<size_t>(p)];
    if (!op_def(prod.op()).prelu_epilogue || !has_no_activation(g.nodes[static_cast<size_t>(p)].params) ||
        prod.inputs.size() < 2 || prod.inputs.size() > 3)
      continue;
    if (const auto* cp = std::get_if<Conv2DParams>(&prod.params); cp && cp->add_residual) continue;
    const int slope = prelu.inputs[1];
    const Shape& y = value_shape(g, prod.outputs.at(0));
    if (!value(g, slope).is_constant() || y.size() < 2 || value_shape(g, slope) != Shape{y[1]}) continue;
    Node merged = prod;
    *epilogue(merged.params) = Activation{ActivationKind::PRelu, 0.01f, 0.f};
    if (merged.inputs.size() == 2) {  // add_constant grows g.values: `y` is not used past this point
      merged.inputs.push_back(zero_bias_channels(g, prod.name, y[1]));
      added = true;
    }
    merged.inputs.push_back(slope);
    if (takes && !takes(g, merged)) continue;
    g.nodes[static_cast<size_t>(p)] = std::move(merged);
    tally.add(op_name(g.nodes[static_cast<size_t>(p)].op()));
    uses.readers.resize(g.values.size(), 1);  // new constants: never a fusable data input
    uses.producer.resize(g.values.size(), -1);
    uses.is_output.resize(g.values.size(), false);
    merge(g, uses, static_cast<size_t>(p), c, removed);
  }
  if (tally.total || added) compact(g, removed);
  if (log)
    log->push_back(tally.total ? fmt::format("fuse_prelu: {} per-channel PRelu {} fused into {}", tally.total,
                                             plural(tally.total, "node", "nodes"), tally.into())
                               : "fuse_prelu: no per-channel PRelu to fuse");
  return g;
}

// --- fuse_depthwise_pointwise ------------------------------------------------------------------------
// A depthwise conv2d (3x3 / 5x5, stride 1 or 2, its activation) whose only reader is a 1x1 stride-1
// conv2d with at most as many output channels (the inverted residual's projection; its activation and
// residual kept) becomes one depthwise_pointwise node at the 1x1's place (its residual may be written
// after the depthwise), named after the depthwise. Both must share one layout (the pass runs after
// channels_last); neither may carry a PRelu. A depthwise without bias gets a zero one.
namespace {

// The depthwise conv2d the pass fuses: weight [C,1,K,K] with groups == C, K 3 or 5, stride 1 or 2 on
// both axes, no dilation, residual or PRelu.
bool fusable_depthwise(const Graph& g, const Node& n) {
  const auto* p = std::get_if<Conv2DParams>(&n.params);
  if (!p || p->add_residual || p->activation.kind == ActivationKind::PRelu || n.inputs.size() < 2 ||
      n.inputs.size() > 3)
    return false;
  const Shape& w = value_shape(g, n.inputs[1]);  // [C,1,K,K] with groups C: C_in = groups * 1 = C
  if (w.size() != 4 || p->groups != w[0] || w[1] != 1 || w[0] < 2) return false;
  const bool k35 = w[2] == w[3] && (w[2] == 3 || w[2] == 5);
  const bool s12 = p->stride_h == p->stride_w && (p->stride_h == 1 || p->stride_h == 2);
  return k35 && s12 && p->dilation_h == 1 && p->dilation_w == 1;
}

// The 1x1 conv2d: stride 1, no padding, groups 1, no PRelu; x, weight, optional bias (+ residual).
bool fusable_pointwise(const Graph& g, const Node& n) {
  const auto* p = std::get_if<Conv2DParams>(&n.params);
  if (!p || p->activation.kind == ActivationKind::PRelu || n.inputs.size() < 2 ||
      n.inputs.size() > (p->add_residual ? 4u : 3u))
    return false;
  const Shape& w = value_shape(g, n.inputs[1]);
  return w.size() == 4 && w[2] == 1 && w[3] == 1 && p->stride_h == 1 && p->stride_w == 1 && p->groups == 1 &&
         p->dilation_h == 1 && p->dilation_w == 1 && !p->pad.top && !p->pad.left && !p->pad.bottom &&
         !p->pad.right;
}

}  // namespace

Graph fuse_depthwise_pointwise(Graph g, const DepthwisePointwisePredicate& takes, std::vector<std::string>* log) {
  Uses uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  int count = 0;
  bool added = false;  // zero biases added for a pair takes then refused: compacted away below
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const Node& pw = g.nodes[c];
    if (!fusable_pointwise(g, pw)) continue;
    const int d = uses.fusable_producer(pw);
    if (d < 0 || removed[static_cast<size_t>(d)]) continue;
    const Node& dw = g.nodes[static_cast<size_t>(d)];
    if (!fusable_depthwise(g, dw) || dw.layout != pw.layout) continue;
    const int64_t C = value_shape(g, dw.inputs[1])[0], CO = value_shape(g, pw.inputs[1])[0];
    if (CO > C) continue;  // the expansion side: measured not to pay (docs/kernels.md)
    const auto& pp = std::get<Conv2DParams>(pw.params);
    Node fused;
    fused.name = dw.name;
    fused.params = DepthwisePointwiseParams{std::get<Conv2DParams>(dw.params), pp};
    fused.layout = pw.layout;
    fused.outputs = pw.outputs;
    fused.fused = dw.fused;
    fused.fused.push_back(pw.name);
    fused.fused.insert(fused.fused.end(), pw.fused.begin(), pw.fused.end());
    // add_constant grows g.values: the inputs are gathered as ids before any is added.
    const int x = dw.inputs[0], dw_w = dw.inputs[1], pw_w = pw.inputs[1];
    const int dw_b = dw.inputs.size() > 2 ? dw.inputs[2] : -1, pw_b = pw.inputs.size() > 2 ? pw.inputs[2] : -1;
    const int residual = pp.add_residual ? pw.inputs[3] : -1;
    const std::string dw_name = dw.name, pw_name = pw.name;
    auto bias_or_zero = [&](int b, int w, const std::string& name) {
      if (b >= 0) return b;
      added = true;
      return zero_bias(g, name, w);
    };
    fused.inputs = {x, dw_w, bias_or_zero(dw_b, dw_w, dw_name), pw_w, bias_or_zero(pw_b, pw_w, pw_name)};
    if (residual >= 0) fused.inputs.push_back(residual);
    if (takes && !takes(g, fused)) continue;
    removed[static_cast<size_t>(d)] = true;
    g.nodes[c] = std::move(fused);
    ++count;
  }
  if (count || added) compact(g, removed);
  if (log)
    log->push_back(count ? fmt::format("fuse_depthwise_pointwise: {} depthwise + 1x1 conv2d {} fused", count,
                                       plural(count, "pair", "pairs"))
                         : "fuse_depthwise_pointwise: no depthwise + 1x1 conv2d pair to fuse");
  return g;
}

// --- fuse_quantized_conv2d ---------------------------------------------------------------------------
// conv2d(dequantize_linear(quantize_linear(x, s, z), s, z), W) with W dequantized at load from int8 with
// zero point 0 (per tensor, or per output channel: axis 0) becomes quantized_conv2d(x, W_q, W_scale,
// bias) at the conv's place: the pair must quantize per tensor to u8 or i8 with one scale and zero point
// on both sides. A dense node so fed ([N, F_in] x [F_out, F_in]) becomes the 1x1 quantized_conv2d of
// [N, F_in, 1, 1] between two reshapes (as TensorRT runs a fully connected layer as a 1x1 convolution),
// so the int8 kernels need no dense form; a conv_transpose2d so fed (weight per tensor or per output
// channel: axis 1) becomes stride-1 quantized_conv2d nodes by kernel segregation (below). The pair stays
// for readers that are not fused (or are graph outputs) and goes when none is left. The merged node
// lists the pair's names after its own fused ones.
namespace {

// The per-tensor value of a one-element constant, or nullopt.
std::optional<float> scalar_constant(const Graph& g, int id) {
  if (id < 0) return 0.f;  // an absent zero point
  const Value& v = value(g, id);
  if (!v.is_constant() || shape_numel(v.shape) != 1) return std::nullopt;
  return v.data[0];
}

// A value written by dequantize_linear(quantize_linear(x, s, z), s, z), per tensor, one scale and zero
// point on both sides: x, s, z, the type and the two nodes. What fuse_quantized_conv2d and
// fuse_quantized_add fold into their nodes.
struct QDQPair {
  int x = -1;
  float scale = 1.f;
  int32_t zero_point = 0;
  DType dtype = DType::U8;
  std::string q_name, dq_name;
};
std::optional<QDQPair> qdq_pair_of(const Graph& g, const Uses& uses, int id) {
  const int dq_id = uses.producer[static_cast<size_t>(id)];
  if (dq_id < 0) return std::nullopt;
  const Node& dq = g.nodes[static_cast<size_t>(dq_id)];
  if (dq.op() != OpType::DequantizeLinear) return std::nullopt;
  const int q_id = uses.producer[static_cast<size_t>(dq.inputs[0])];
  if (q_id < 0) return std::nullopt;
  const Node& q = g.nodes[static_cast<size_t>(q_id)];
  if (q.op() != OpType::QuantizeLinear) return std::nullopt;
  const auto qs = scalar_constant(g, q.inputs[1]), ds = scalar_constant(g, dq.inputs[1]);
  const auto qz = scalar_constant(g, q.inputs.size() > 2 ? q.inputs[2] : -1);
  const auto dz = scalar_constant(g, dq.inputs.size() > 2 ? dq.inputs[2] : -1);
  if (!qs || !ds || !qz || !dz || *qs != *ds || *qz != *dz) return std::nullopt;
  return QDQPair{q.inputs[0], *qs, static_cast<int32_t>(*qz), std::get<QuantizeLinearParams>(q.params).dtype,
                 q.name, dq.name};
}

// One axis of a transposed convolution's stride phase r (kernel segregation: Tida et al.'s sub-kernels,
// docs/kernels.md "conv_transpose2d"): output s*q + r takes input q + (r + pad) / s - m through tap
// s*m + (r + pad) % s, m in [0, taps). As a stride-1 convolution (correlation) of the input padded by
// lo / hi, window tap t is weight index s * (taps - 1 - t) + first. nullopt where no tap feeds the phase
// or the padding falls outside conv2d's [0, taps).
struct PhaseAxis {
  int taps = 0, first = 0, lo = 0, hi = 0;
};
std::optional<PhaseAxis> phase_axis(int64_t in, int64_t out, int64_t k, int s, int pad, int r) {
  const int a = r + pad;
  PhaseAxis ph;
  ph.first = a % s;
  if (ph.first >= k) return std::nullopt;
  ph.taps = static_cast<int>((k - ph.first + s - 1) / s);
  ph.lo = ph.taps - 1 - a / s;
  const int64_t hi = out / s - 1 + ph.taps - in - ph.lo;
  if (ph.lo < 0 || hi < 0 || hi >= ph.taps) return std::nullopt;
  ph.hi = static_cast<int>(hi);
  return ph;
}

// A QDQ-fed conv_transpose2d (stride s on both axes, groups and dilation 1, weight [C_in, C_out, KH, KW]
// int8) as quantized_conv2d nodes on its x, or nothing where `takes` refuses one or the geometry does not
// split (an output size not a multiple of s, a phase without taps). Kernel segregation: output phase
// (py, px), the pixels (s*qy + py, s*qx + px), is a stride-1 convolution of x with the sub-kernel of the
// taps congruent to (py + pad_top, px + pad_left) mod s; the s*s phases ("<tconv>:phase<py>_<px>") are
// concatenated along the channels ("<tconv>:concat") and interleaved by depth_to_space (DCR, block s,
// "<tconv>:interleave"), so the int8 kernels need no transposed form. Stride 1 is one phase, the
// flipped kernel (the node keeps the tconv's name); a 1x1 input without padding (a generator's first
// layer) one 1x1 quantized_conv2d of C_out*KH*KW channels (the tconv's name) and a reshape
// ("<tconv>:reshape"), where the phase form would mostly multiply padding. Weights, per-channel scales
// and biases are new constants in the sub-kernels' order; the first node lists the pair's names.
// `interleave` false (cuda): strides > 1 are left as they are (see backend_passes.cc).
std::vector<Node> segregated_quantized_tconv(Graph& g, const Node& tconv, const QDQPair& pair,
                                             const Value::Dequantized& wd, const QuantizedConvPredicate& takes,
                                             bool interleave, bool& added) {
  const Node t = tconv;  // g.values grows below: nothing of g is held by reference
  const auto& p = std::get<ConvTranspose2DParams>(t.params);
  if (p.groups != 1 || p.dilation_h != 1 || p.dilation_w != 1 || p.stride_h != p.stride_w) return {};
  const Shape xs = value(g, pair.x).shape, ys = value(g, t.outputs.at(0)).shape, ws = value(g, wd.source).shape;
  if (xs.size() != 4 || ys.size() != 4 || ws.size() != 4) return {};
  const int64_t CI = ws[0], CO = ws[1], KH = ws[2], KW = ws[3];
  const int s = p.stride_h;
  const bool one_by_one = xs[2] == 1 && xs[3] == 1 && p.pad.top == 0 && p.pad.left == 0 && p.pad.bottom == 0 &&
                          p.pad.right == 0 && p.output_padding_h == 0 && p.output_padding_w == 0;
  if (!one_by_one && (ys[2] % s != 0 || ys[3] % s != 0 || (s > 1 && !interleave))) return {};
  const int scale_id = wd.scale, x = pair.x;
  const bool per_channel = shape_numel(value(g, scale_id).shape) != 1;
  const std::vector<float> w(value(g, wd.source).data, value(g, wd.source).data + shape_numel(ws));
  const float* given_bias = t.inputs.size() > 2 ? value(g, t.inputs[2]).data : nullptr;
  if (t.inputs.size() > 2 && !given_bias) return {};  // a bias computed at run time
  std::vector<float> bias(static_cast<size_t>(CO), 0.f);
  if (given_bias) bias.assign(given_bias, given_bias + CO);
  added = true;
  auto add_activation = [&](const std::string& name, Shape shape) {
    Value v;
    v.name = name;
    v.shape = std::move(shape);
    g.values.push_back(std::move(v));
    return static_cast<int>(g.values.size()) - 1;
  };
  auto qconv = [&](const std::string& name, const Conv2DParams& cp, std::vector<int> inputs, int out) {
    Node n;
    n.name = name;
    n.params = QuantizedConv2DParams{cp, pair.scale, pair.zero_point, pair.dtype};
    n.layout = t.layout;
    n.inputs = std::move(inputs);
    n.outputs = {out};
    return n;
  };
  std::vector<Node> nodes;
  if (one_by_one) {  // y[n, co, ky, kx] = sum_ci x[n, ci] w[ci, co, ky, kx]: channel (co, ky, kx) of a 1x1 conv
    const int64_t taps = KH * KW, F = CO * taps;
    std::vector<float> w1(static_cast<size_t>(F * CI)), b1(static_cast<size_t>(F));
    for (int64_t f = 0; f < F; ++f) {
      b1[size_t(f)] = bias[size_t(f / taps)];
      for (int64_t ci = 0; ci < CI; ++ci) w1[size_t(f * CI + ci)] = w[size_t((ci * CO + f / taps) * taps + f % taps)];
    }
    int scale = scale_id;
    if (per_channel) {
      std::vector<float> s1(static_cast<size_t>(F));
      const float* sc = value(g, scale_id).data;
      for (int64_t f = 0; f < F; ++f) s1[size_t(f)] = sc[f / taps];
      scale = g.add_constant(t.name + ":1x1.w_scale", Shape{F}, std::move(s1));
    }
    const int wid = add_int8_constant(g, t.name + ":1x1.w", Shape{F, CI, 1, 1}, std::move(w1));
    const int bid = g.add_constant(t.name + ":1x1.b", Shape{F}, std::move(b1));
    const int out = add_activation(t.name + ":1x1", Shape{xs[0], F, 1, 1});
    Conv2DParams cp;
    cp.activation = p.activation;
    nodes.push_back(qconv(t.name, cp, {x, wid, scale, bid}, out));
    Node reshape;
    reshape.name = t.name + ":reshape";
    reshape.params = ReshapeParams{Shape{CO, KH, KW}};
    reshape.inputs = {out};
    reshape.outputs = t.outputs;
    nodes.push_back(std::move(reshape));
  } else {
    const int bid = given_bias ? t.inputs[2] : zero_bias_channels(g, t.name, CO);
    std::vector<int> phase_outputs;
    for (int py = 0; py < s; ++py)
      for (int px = 0; px < s; ++px) {
        const auto ah = phase_axis(xs[2], ys[2], KH, s, p.pad.top, py);
        const auto aw = phase_axis(xs[3], ys[3], KW, s, p.pad.left, px);
        if (!ah || !aw) return {};
        std::vector<float> wp(static_cast<size_t>(CO * CI * ah->taps * aw->taps));
        size_t e = 0;
        for (int64_t co = 0; co < CO; ++co)
          for (int64_t ci = 0; ci < CI; ++ci)
            for (int ty = 0; ty < ah->taps; ++ty)
              for (int tx = 0; tx < aw->taps; ++tx)
                wp[e++] = w[size_t(((ci * CO + co) * KH + s * (ah->taps - 1 - ty) + ah->first) * KW +
                                   s * (aw->taps - 1 - tx) + aw->first)];
        const std::string name = s == 1 ? t.name : fmt::format("{}:phase{}_{}", t.name, py, px);
        const int wid = add_int8_constant(g, name + ".w", Shape{CO, CI, ah->taps, aw->taps}, std::move(wp));
        const int out = s == 1 ? t.outputs.at(0) : add_activation(name, Shape{xs[0], CO, ys[2] / s, ys[3] / s});
        Conv2DParams cp;
        cp.pad = Padding2D{ah->lo, aw->lo, ah->hi, aw->hi};
        cp.activation = p.activation;
        nodes.push_back(qconv(name, cp, {x, wid, scale_id, bid}, out));
        phase_outputs.push_back(out);
      }
    if (s > 1) {
      const int cat = add_activation(t.name + ":concat", Shape{xs[0], CO * s * s, ys[2] / s, ys[3] / s});
      Node concat, interleave;
      concat.name = t.name + ":concat";
      concat.params = ConcatParams{1};
      concat.inputs = phase_outputs;
      concat.outputs = {cat};
      interleave.name = t.name + ":interleave";
      interleave.params = DepthToSpaceParams{s, DepthToSpaceMode::DCR};
      interleave.inputs = {cat};
      interleave.outputs = t.outputs;
      nodes.push_back(std::move(concat));
      nodes.push_back(std::move(interleave));
    }
  }
  for (const Node& n : nodes)
    if (n.op() == OpType::QuantizedConv2D && takes && !takes(g, n)) return {};
  nodes.front().fused = t.fused;
  nodes.front().fused.push_back(pair.q_name);
  nodes.front().fused.push_back(pair.dq_name);
  return nodes;
}

// After a QDQ fusion: the quantize_linear / dequantize_linear nodes no reader is left for (backwards, a
// removed node's inputs lose a reader), then compact. `added`: constants were added (compact anyway).
void drop_unread_qdq(Graph& g, bool fused, bool added) {
  std::vector<bool> removed(g.nodes.size(), false);
  if (fused) {
    Uses after(g);
    for (size_t i = g.nodes.size(); i-- > 0;) {
      const Node& n = g.nodes[i];
      if (n.op() != OpType::DequantizeLinear && n.op() != OpType::QuantizeLinear) continue;
      const auto out = static_cast<size_t>(n.outputs.at(0));
      if (after.readers[out] != 0 || after.is_output[out]) continue;
      removed[i] = true;
      for (int id : n.inputs) --after.readers[static_cast<size_t>(id)];
    }
  }
  if (fused || added) compact(g, removed);
}

}  // namespace

Graph fuse_quantized_conv2d(Graph g, const QuantizedConvPredicate& takes, std::vector<std::string>* log,
                            bool interleave) {
  Uses uses(g);
  int count = 0;
  bool added = false;
  // A dense node becomes three: reshape x [N, F_in] -> [N, F_in, 1, 1], the 1x1 quantized_conv2d, and
  // reshape back to [N, F_out] (the same bytes in either layout); a conv_transpose2d its phases: expanded
  // here after the loop, which reads the original nodes through `uses`.
  std::vector<std::vector<Node>> expanded(g.nodes.size());
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const Node& conv = g.nodes[c];
    const auto* cp = std::get_if<Conv2DParams>(&conv.params);
    const auto* dp = std::get_if<DenseParams>(&conv.params);
    const auto* tp = std::get_if<ConvTranspose2DParams>(&conv.params);
    if ((!cp && !dp && !tp) || conv.inputs.size() < 2) continue;
    if ((cp ? cp->activation : dp ? dp->activation : tp->activation).kind == ActivationKind::PRelu) continue;
    const std::optional<QDQPair> pair = qdq_pair_of(g, uses, conv.inputs[0]);
    if (!pair) continue;
    // the weight: int8 with zero point 0, per tensor or per output channel (a tconv's axis 1)
    const Value& w = value(g, conv.inputs[1]);
    if (w.shape.size() != (dp ? 2u : 4u)) continue;
    const std::optional<Value::Dequantized> weight_q = int8_source(g, w, tp ? 1 : 0);
    if (!weight_q) continue;
    const Value::Dequantized wd = *weight_q;
    if (tp) {
      std::vector<Node> nodes = segregated_quantized_tconv(g, conv, *pair, wd, takes, interleave, added);
      if (nodes.empty()) continue;
      expanded[c] = std::move(nodes);
      ++count;
      continue;
    }
    const Shape x_shape = value(g, pair->x).shape;  // declared (a leading -1 is the batch)
    if (dp && x_shape.size() != 2) continue;
    Conv2DParams conv_params;
    if (cp) {
      conv_params = *cp;
    } else {
      conv_params.activation = dp->activation;
    }
    Node merged;
    merged.name = conv.name;
    merged.params = QuantizedConv2DParams{conv_params, pair->scale, pair->zero_point, pair->dtype};
    merged.layout = conv.layout;
    merged.outputs = conv.outputs;
    merged.fused = conv.fused;
    merged.fused.push_back(pair->q_name);
    merged.fused.push_back(pair->dq_name);
    // add_constant and the values below grow g.values: ids are gathered before any is added.
    int x = pair->x, source = wd.source;
    const int scale = wd.scale, weight = conv.inputs[1];
    const int bias = conv.inputs.size() > 2 ? conv.inputs[2] : -1;
    const int residual = cp && cp->add_residual ? conv.inputs[3] : -1;
    const std::string name = conv.name;
    const std::vector<int> outputs = conv.outputs;
    int b = bias;
    if (b < 0) {
      b = zero_bias(g, name, weight);
      added = true;
    }
    if (dp) {  // the 1x1 convolution's x, y and weight [F_out, F_in, 1, 1] (the int8 source's data, aliased)
      const Shape ws = value(g, source).shape;
      Value w4 = value(g, source);
      w4.name += ":1x1";
      w4.shape = {ws[0], ws[1], 1, 1};
      Value x4, y4;
      x4.name = name + ":x_1x1";
      x4.shape = {x_shape[0], ws[1], 1, 1};
      y4.name = name + ":y_1x1";
      y4.shape = {x_shape[0], ws[0], 1, 1};
      for (Value* v : {&w4, &x4, &y4}) g.values.push_back(std::move(*v));
      const int n = static_cast<int>(g.values.size());
      source = n - 3;
      x = n - 2;
      merged.outputs = {n - 1};
      added = true;
    }
    merged.inputs = {x, source, scale, b};
    if (residual >= 0) merged.inputs.push_back(residual);
    if (takes && !takes(g, merged)) continue;
    if (dp) {
      Node to4, to2;
      to4.name = name + ":to_1x1";
      to4.params = ReshapeParams{Shape{value(g, source).shape[1], 1, 1}};
      to4.inputs = {pair->x};
      to4.outputs = {x};
      to2.name = name + ":from_1x1";
      to2.params = ReshapeParams{Shape{value(g, source).shape[0]}};
      to2.inputs = merged.outputs;
      to2.outputs = outputs;
      expanded[c].push_back(std::move(to4));
      expanded[c].push_back(std::move(merged));
      expanded[c].push_back(std::move(to2));
    } else {
      g.nodes[c] = std::move(merged);
    }
    ++count;
  }
  if (std::any_of(expanded.begin(), expanded.end(), [](const std::vector<Node>& e) { return !e.empty(); })) {
    std::vector<Node> nodes;
    for (size_t c = 0; c < g.nodes.size(); ++c)
      if (expanded[c].empty())
        nodes.push_back(std::move(g.nodes[c]));
      else
        for (Node& n : expanded[c]) nodes.push_back(std::move(n));
    g.nodes = std::move(nodes);
  }
  drop_unread_qdq(g, count > 0, added);
  if (log)
    log->push_back(count ? fmt::format("fuse_quantized_conv2d: {} quantize_linear -> dequantize_linear -> conv2d / dense / conv_transpose2d {} "
                                       "fused into quantized_conv2d",
                                       count, plural(count, "chain", "chains"))
                         : "fuse_quantized_conv2d: no quantize_linear -> dequantize_linear -> conv2d / dense / conv_transpose2d chain to fuse");
  return g;
}

// --- fuse_quantized_add --------------------------------------------------------------------------------
// add(dequantize_linear(quantize_linear(a)), ...) with a per-tensor pair (either input or both) becomes
// add(a, ...) with AddParams::input_qdq[k] set to the pair's scale, zero point and type; the pairs go
// where no reader is left (a quantized_conv2d took the other reader of a shared pair already), and
// the add lists their names in `fused`.
Graph fuse_quantized_add(Graph g, const QuantizedConvPredicate& takes, std::vector<std::string>* log) {
  Uses uses(g);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto* ap = std::get_if<AddParams>(&g.nodes[i].params);
    if (!ap || ap->input_qdq[0].on || ap->input_qdq[1].on) continue;
    Node merged = g.nodes[i];
    auto& mp = std::get<AddParams>(merged.params);
    bool any = false;
    for (int k = 0; k < 2; ++k) {
      const std::optional<QDQPair> pair = qdq_pair_of(g, uses, merged.inputs[static_cast<size_t>(k)]);
      if (!pair) continue;
      mp.input_qdq[k] = AddInputQDQ{true, pair->scale, pair->zero_point, pair->dtype};
      merged.inputs[static_cast<size_t>(k)] = pair->x;
      merged.fused.push_back(pair->q_name);
      merged.fused.push_back(pair->dq_name);
      any = true;
    }
    if (!any || (takes && !takes(g, merged))) continue;
    g.nodes[i] = std::move(merged);
    ++count;
  }
  drop_unread_qdq(g, count > 0, false);
  if (log)
    log->push_back(count ? fmt::format("fuse_quantized_add: {} add {} read through their quantize_linear -> "
                                       "dequantize_linear pairs",
                                       count, plural(count, "node", "nodes"))
                         : "fuse_quantized_add: no add reading a quantize_linear -> dequantize_linear pair");
  return g;
}

// --- quantized_activations ---------------------------------------------------------------------------
// Values in node order, so a node's input is settled before its output is asked about: each proposal
// asks `takes` about the node as it would then be (its other side as already decided).
Graph quantized_activations(Graph g, const QuantizedConvPredicate& takes, std::vector<std::string>* log) {
  Uses uses(g);
  std::vector<std::vector<size_t>> readers(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int id : g.nodes[i].inputs) readers[static_cast<size_t>(id)].push_back(i);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto* pp = std::get_if<QuantizedConv2DParams>(&g.nodes[i].params);
    if (!pp) continue;
    const auto out = static_cast<size_t>(g.nodes[i].outputs.at(0));
    const std::vector<size_t>& rs = readers[out];
    if (uses.is_output[out] || rs.empty()) continue;
    const QuantizedConv2DParams* first = nullptr;
    bool all = true;
    for (size_t r : rs) {
      const Node& reader = g.nodes[r];
      const auto* rp = std::get_if<QuantizedConv2DParams>(&reader.params);
      // x only (a residual input stays float), every reader alike (one quantization of the value)
      all = rp && !rp->x_quantized && static_cast<size_t>(reader.inputs[0]) == out &&
            std::count(reader.inputs.begin(), reader.inputs.end(), static_cast<int>(out)) == 1 &&
            (!first || (rp->x_scale == first->x_scale && rp->x_zero_point == first->x_zero_point &&
                        rp->x_dtype == first->x_dtype));
      if (!all) break;
      if (!first) first = rp;
    }
    if (!all) continue;
    Node producer = g.nodes[i];
    auto& yp = std::get<QuantizedConv2DParams>(producer.params);
    yp.y_dtype = first->x_dtype, yp.y_scale = first->x_scale, yp.y_zero_point = first->x_zero_point;
    std::vector<Node> changed;
    for (size_t r : rs) {
      changed.push_back(g.nodes[r]);
      std::get<QuantizedConv2DParams>(changed.back().params).x_quantized = true;
    }
    if (takes && (!takes(g, producer) ||
                  !std::all_of(changed.begin(), changed.end(), [&](const Node& n) { return takes(g, n); })))
      continue;
    g.nodes[i] = std::move(producer);
    for (size_t k = 0; k < rs.size(); ++k) g.nodes[rs[k]] = std::move(changed[k]);
    g.values[out].stored_8bit = true;
    ++count;
  }
  if (log)
    log->push_back(count ? fmt::format("quantized_activations: {} {} kept in 8 bits between quantized_conv2d nodes",
                                       count, plural(count, "tensor", "tensors"))
                         : "quantized_activations: no tensor between quantized_conv2d nodes");
  return g;
}

void add_extra_outputs(Graph& g, const std::vector<std::string>& names) {
  const size_t model_outputs = g.outputs.size();
  for (const std::string& name : names) {
    std::vector<int> ids;
    for (size_t id = 0; id < g.values.size(); ++id)
      if (g.values[id].name == name) ids.push_back(static_cast<int>(id));
    if (ids.empty())
      throw Error(fmt::format("extra output '{}': {} has no value of that name", name, g.origin));
    if (ids.size() > 1)
      throw Error(fmt::format("extra output '{}': {} has {} values of that name", name, g.origin,
                              ids.size()));
    const int id = ids[0];
    if (g.values[static_cast<size_t>(id)].is_constant())
      throw Error(fmt::format("extra output '{}': a constant of {} (weights), not an activation", name,
                              g.origin));
    const auto at = std::find(g.outputs.begin(), g.outputs.end(), id);
    if (at != g.outputs.end())
      throw Error(fmt::format("extra output '{}': {}", name,
                              static_cast<size_t>(at - g.outputs.begin()) < model_outputs
                                  ? "already an output of " + g.origin
                                  : std::string("given twice")));
    g.outputs.push_back(id);
  }
}

Graph run_passes(Graph g, const PassOptions& options, std::vector<std::string>* log) {
  const size_t nodes_before = g.nodes.size();
  if (options.fold_batchnorm)
    g = fold_batchnorm(std::move(g), log);
  else if (log)
    log->push_back("fold_batchnorm: off");
  if (options.fuse_conv_avgpool)
    g = fuse_conv_avgpool(std::move(g), log);
  else if (log)
    log->push_back("fuse_conv_avgpool: off");
  if (options.fuse_activation)
    g = fuse_activation(std::move(g), log);
  else if (log)
    log->push_back("fuse_activation: off");
  if (g.nodes.size() != nodes_before) validate_graph(g);  // a broken rewrite fails here, not in a kernel
  return g;
}

// --- validate_graph -----------------------------------------------------------------------------------

void validate_graph(const Graph& g) {
  const size_t nv = g.values.size();
  auto fail = [&](const std::string& what) { throw Error(g.origin + ": after graph passes: " + what); };
  auto check_id = [&](int id, const std::string& what) {
    if (id < 0 || static_cast<size_t>(id) >= nv)
      fail(fmt::format("{} is value {} but the graph has {} values", what, id, nv));
    return static_cast<size_t>(id);
  };
  std::vector<bool> written(nv, false);
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    const size_t id = check_id(g.inputs[k], fmt::format("input {}", k));
    if (g.values[id].is_constant()) fail(fmt::format("input {} '{}' is a constant", k, g.values[id].name));
    if (written[id]) fail(fmt::format("input {} '{}' is listed twice", k, g.values[id].name));
    written[id] = true;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string where = fmt::format("node {} '{}' ({})", i, n.name, op_name(n.op()));
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const size_t id = check_id(n.inputs[k], fmt::format("{}: input {}", where, k));
      const bool constant = g.values[id].is_constant();
      // binary: either input may be a constant (the shape rule checks how it broadcasts).
      const auto* conv = std::get_if<Conv2DParams>(&n.params);
      const auto* dwpw = std::get_if<DepthwisePointwiseParams>(&n.params);
      const auto* qconv = std::get_if<QuantizedConv2DParams>(&n.params);
      const bool residual = (conv && conv->add_residual && k == 3) ||  // fuse_conv_residual's data input
                            (dwpw && dwpw->pointwise.add_residual && k == 5) ||  // and the fused blocks'
                            (qconv && qconv->conv.add_residual && k == 4);
      if (n.op() != OpType::Binary && (is_parameter_input(n.op(), k) && !residual) != constant)
        fail(fmt::format("{}: input {} '{}' is {}", where, k, g.values[id].name,
                         constant ? "a constant where data is expected" : "an activation where a "
                                                                          "constant is expected"));
      if (!constant && !written[id])
        fail(fmt::format("{}: reads '{}' before any node writes it", where, g.values[id].name));
    }
    if (n.outputs.size() != 1) fail(fmt::format("{}: has {} outputs (expected 1)", where, n.outputs.size()));
    const size_t out = check_id(n.outputs[0], where + ": output");
    if (g.values[out].is_constant()) fail(where + ": writes the constant '" + g.values[out].name + "'");
    if (written[out]) fail(where + ": writes '" + g.values[out].name + "', which is already written");
    written[out] = true;
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const size_t id = check_id(g.outputs[k], fmt::format("output {}", k));
    if (!written[id] || g.values[id].is_constant())
      fail(fmt::format("output {} '{}' is never written", k, g.values[id].name));
  }
  infer_shapes(g, 1);  // declared shapes still match the (possibly fused) ops
}

}  // namespace detail
}  // namespace infer
