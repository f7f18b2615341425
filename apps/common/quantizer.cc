// Post-training static quantization (quantizer.h): calibration statistics, clipping ranges and the
// QDQ rewrite through ModelBuilder. The entropy method is TensorRT's calibration (Migacz, "8-bit
// Inference with TensorRT", GTC 2017) as MXNet implements it: for every threshold bin i >= 128 of the
// |x| histogram, P = the first i bins with the outliers added to the last, Q = P merged into 128 levels
// and spread back over the non-empty bins; the i with the least KL(P || Q) wins.
#include "quantizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "infer/error.h"
#include "infer/model_builder.h"

namespace infer::quant {

Method parse_method(const std::string& name) {
  if (name == "minmax") return Method::MinMax;
  if (name == "percentile") return Method::Percentile;
  if (name == "entropy") return Method::Entropy;
  throw Error("unknown calibration method '" + name + "' (minmax, percentile or entropy)");
}

const char* method_name(Method method) {
  switch (method) {
    case Method::MinMax: return "minmax";
    case Method::Percentile: return "percentile";
    case Method::Entropy: return "entropy";
  }
  return "?";
}

void Observer::add(const float* x, int64_t n) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, amax = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!std::isfinite(v)) {
      ++nonfinite_;
      continue;
    }
    ++finite;
    lo = std::min(lo, double(v));
    hi = std::max(hi, double(v));
    amax = std::max(amax, double(std::fabs(v)));
  }
  if (finite == 0) return;
  if (hist_.empty()) hist_.assign(kBins, 0.0);
  if (count_ == 0) {
    min_ = lo;
    max_ = hi;
  } else {
    min_ = std::min(min_, lo);
    max_ = std::max(max_, hi);
  }
  if (amax > amax_) {  // widen: move the old counts by their bin centres
    if (amax_ > 0) {
      std::vector<double> wider(kBins, 0.0);
      const double old_w = amax_ / kBins, new_w = amax / kBins;
      for (int b = 0; b < kBins; ++b)
        if (hist_[size_t(b)] != 0) {
          const int to = std::min(kBins - 1, int((b + 0.5) * old_w / new_w));
          wider[size_t(to)] += hist_[size_t(b)];
        }
      hist_.swap(wider);
    }
    amax_ = amax;
  }
  const double scale = amax_ > 0 ? kBins / amax_ : 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!std::isfinite(v)) continue;
    hist_[size_t(std::min(kBins - 1, int(std::fabs(v) * scale)))] += 1.0;
  }
  count_ += finite;
}

float Observer::percentile_threshold(double percentile) const {
  if (count_ == 0 || amax_ <= 0) return 0.f;
  const double want = double(count_) * std::clamp(percentile, 0.0, 100.0) / 100.0;
  double seen = 0;
  for (int b = 0; b < kBins; ++b) {
    seen += hist_[size_t(b)];
    if (seen >= want) return float((b + 1) * amax_ / kBins);
  }
  return float(amax_);
}

namespace {

// MXNet's _smooth_distribution: zeros get eps, taken evenly from the non-zeros. False when all are zero
// or the non-zeros cannot spare it.
bool smooth(std::vector<double>& p, double eps = 1e-4) {
  size_t zeros = 0;
  for (double v : p) zeros += v == 0;
  const size_t nonzeros = p.size() - zeros;
  if (nonzeros == 0) return false;
  const double take = eps * double(zeros) / double(nonzeros);
  if (take >= 1.0) return false;
  for (double& v : p) v = v == 0 ? eps : v - take;
  for (double v : p)
    if (v <= 0) return false;
  return true;
}

double normalise(std::vector<double>& p) {
  double s = 0;
  for (double v : p) s += v;
  if (s > 0)
    for (double& v : p) v /= s;
  return s;
}

}  // namespace

float Observer::entropy_threshold() const {
  constexpr int kLevels = 128;
  if (count_ == 0 || amax_ <= 0) return 0.f;
  const double width = amax_ / kBins;
  double best = std::numeric_limits<double>::infinity();
  int best_i = kBins;
  std::vector<double> p, q;
  for (int i = kLevels; i <= kBins; ++i) {
    p.assign(hist_.begin(), hist_.begin() + i);
    for (int b = i; b < kBins; ++b) p[size_t(i - 1)] += hist_[size_t(b)];  // outliers into the last bin
    // Q: the first i bins merged into kLevels levels (the remainder into the last), spread evenly
    // over the bins that are non-empty.
    const int merged = i / kLevels;
    q.assign(size_t(i), 0.0);
    for (int j = 0; j < kLevels; ++j) {
      const int start = j * merged, stop = j == kLevels - 1 ? i : start + merged;
      double sum = 0;
      int nonempty = 0;
      for (int b = start; b < stop; ++b) {
        sum += hist_[size_t(b)];
        nonempty += hist_[size_t(b)] != 0;
      }
      if (nonempty == 0) continue;
      for (int b = start; b < stop; ++b)
        if (hist_[size_t(b)] != 0) q[size_t(b)] = sum / nonempty;
    }
    for (int b = 0; b < i; ++b)
      if (p[size_t(b)] == 0) q[size_t(b)] = 0;
    if (normalise(p) <= 0 || normalise(q) <= 0) continue;
    if (!smooth(p) || !smooth(q)) continue;
    double kl = 0;
    for (int b = 0; b < i; ++b) kl += p[size_t(b)] * std::log(p[size_t(b)] / q[size_t(b)]);
    if (kl < best) {
      best = kl;
      best_i = i;
    }
  }
  return float((best_i + 0.5) * width > amax_ ? amax_ : (best_i + 0.5) * width);
}

std::pair<float, float> Observer::range(Method method, double percentile) const {
  float lo = std::min(min(), 0.f), hi = std::max(max(), 0.f);
  if (method == Method::MinMax || count_ == 0) return {lo, hi};
  const float t = method == Method::Percentile ? percentile_threshold(percentile) : entropy_threshold();
  return {std::max(lo, -t), std::min(hi, t)};
}

QuantParams activation_params(float lo, float hi, DType type) {
  lo = std::min(lo, 0.f);
  hi = std::max(hi, 0.f);
  QuantParams p;
  if (type == DType::I8) {
    const float a = std::max(-lo, hi);
    if (a > 0 && std::isfinite(a)) p.scale = a / 127.f;
    return p;
  }
  if (type != DType::U8) throw Error("activations quantize to u8 or i8");
  const float span = hi - lo;
  if (!(span > 0) || !std::isfinite(span)) return p;
  p.scale = span / 255.f;
  p.zero_point = int(std::clamp(std::nearbyint(-lo / p.scale), 0.f, 255.f));
  return p;
}

QuantizedWeight quantize_weight(const float* w, const Shape& shape, int axis, bool reduce_range) {
  const float qmax = reduce_range ? 64.f : 127.f;
  if (axis < 0 || axis >= int(shape.size())) throw Error("weight axis " + std::to_string(axis) + " out of range");
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t channels = shape[size_t(axis)];
  QuantizedWeight out;
  out.scale.assign(size_t(channels), 0.f);
  out.q.resize(size_t(outer * channels * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i)
        out.scale[size_t(c)] = std::max(out.scale[size_t(c)], std::fabs(w[(o * channels + c) * inner + i]));
  for (float& s : out.scale) s = s > 0 && std::isfinite(s) ? s / qmax : 1.f;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * channels + c) * inner + i;
        out.q[size_t(k)] = std::clamp(std::nearbyint(w[k] / out.scale[size_t(c)]), -qmax, qmax);
      }
  return out;
}

namespace {

// The weight's output-channel axis for the ops quantize() rewrites; -1 for every other op.
int weight_axis(const std::string& op) {
  if (op == "conv2d" || op == "conv_pool2d" || op == "dense") return 0;
  if (op == "conv_transpose2d") return 1;  // weight [C_in, C_out / groups, KH, KW], as ONNX Runtime
  return -1;
}

// Names not yet used by any value or node (the builder's tensor names, node names).
struct Names {
  std::set<std::string> used;
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; used.count(name); ++k) name = base + "_" + std::to_string(k);
    used.insert(name);
    return name;
  }
};

}  // namespace

Plan plan(const Model& model, const Options& options) {
  std::map<std::string, const ModelConstant*> constants;
  const std::vector<ModelConstant> all = model.constants();
  for (const ModelConstant& c : all) {
    if (c.dequantized)
      throw Error("model '" + model.origin() + "' is already quantized (constant '" + c.name +
                  "' is dequantized from integers)");
    constants[c.name] = &c;
  }
  std::set<std::string> excluded = options.exclude, observed;
  Plan p;
  for (const ModelNode& n : model.nodes()) {
    if (n.op == "quantize_linear" || n.op == "dequantize_linear")
      throw Error("model '" + model.origin() + "' is already quantized (node '" + n.name + "' is " + n.op + ")");
    excluded.erase(n.name);
    const int axis = weight_axis(n.op);
    if (axis < 0 || options.exclude.count(n.name) || n.inputs.size() < 2 || n.outputs.size() != 1) continue;
    if (constants.count(n.inputs[0]) || !constants.count(n.inputs[1])) continue;  // data must be an activation
    p.nodes.push_back({n.name, n.op, n.inputs[0], n.outputs[0], n.inputs[1], axis});
    if (observed.insert(n.inputs[0]).second) p.activations.push_back(n.inputs[0]);
  }
  if (!excluded.empty()) throw Error("--exclude names node '" + *excluded.begin() + "', which the model lacks");
  return p;
}

std::vector<uint8_t> rewrite(const Model& model, const Plan& plan,
                             const std::map<std::string, std::pair<float, float>>& ranges, const Options& options,
                             const std::string& producer, const std::map<std::string, std::string>& metadata) {
  if (options.activation != DType::U8 && options.activation != DType::I8)
    throw Error("activations quantize to u8 or i8");
  ModelBuilder b(model.name());
  b.set_description(model.description());
  b.set_producer(producer);
  for (const auto& [key, value] : model.metadata()) b.set_metadata(key, value);
  for (const auto& [key, value] : metadata) b.set_metadata(key, value);

  Names names;
  const std::vector<ModelNode> nodes = model.nodes();
  const std::vector<ModelConstant> constants = model.constants();
  for (const TensorInfo& t : model.inputs()) names.used.insert(t.name);
  for (const ModelConstant& c : constants) names.used.insert(c.name);
  for (const ModelNode& n : nodes) {
    names.used.insert(n.name);
    names.used.insert(n.outputs.begin(), n.outputs.end());
  }

  std::map<std::string, int> weight_axis_of;  // constant -> axis (the first quantized reader's)
  std::set<std::string> quantized_nodes;
  for (const Plan::Node& n : plan.nodes) {
    weight_axis_of.emplace(n.weight, n.axis);
    quantized_nodes.insert(n.name);
  }

  std::map<std::string, int> id;
  for (const TensorInfo& t : model.inputs()) id[t.name] = b.input(t.name, t.shape);
  for (const ModelConstant& c : constants) {
    const int64_t n = shape_numel(c.shape);
    const auto axis = weight_axis_of.find(c.name);
    if (axis == weight_axis_of.end()) {
      id[c.name] = b.constant(c.name, c.shape, std::vector<float>(c.data, c.data + n));
      continue;
    }
    const QuantizedWeight q = quantize_weight(c.data, c.shape, axis->second, options.reduce_range);
    const Shape per_channel{int64_t(q.scale.size())};
    const int source = b.constant(names.fresh(c.name + "_quantized"), c.shape, q.q, DType::I8);
    const int scale = b.constant(names.fresh(c.name + "_scale"), per_channel, q.scale);
    const int zero = b.constant(names.fresh(c.name + "_zero_point"), per_channel,
                                std::vector<float>(q.scale.size(), 0.f), DType::I8);
    // The dequantized weight keeps the constant's name (the loader folds it back into a constant).
    id[c.name] = b.node(names.fresh(c.name + "_dequantize"), DequantizeLinearParams{axis->second},
                        {source, scale, zero}, c.name);
  }

  std::map<std::string, int> dequantized;  // activation -> its Q -> DQ pair's output
  const auto qdq = [&](const std::string& value) {
    const auto done = dequantized.find(value);
    if (done != dequantized.end()) return done->second;
    const auto r = ranges.find(value);
    if (r == ranges.end()) throw Error("no calibration range for value '" + value + "'");
    const QuantParams qp = activation_params(r->second.first, r->second.second, options.activation);
    const int scale = b.constant(names.fresh(value + "_scale"), {1}, {qp.scale});
    const int zero = b.constant(names.fresh(value + "_zero_point"), {1}, {float(qp.zero_point)}, options.activation);
    const int q = b.node(names.fresh(value + "_quantize"), QuantizeLinearParams{1, options.activation},
                         {id.at(value), scale, zero}, names.fresh(value + "_quantized"));
    const int dq = b.node(names.fresh(value + "_dequantize"), DequantizeLinearParams{1}, {q, scale, zero},
                          names.fresh(value + "_dequantized"));
    dequantized[value] = dq;
    return dq;
  };

  for (const ModelNode& n : nodes) {
    std::vector<int> inputs;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const auto found = id.find(n.inputs[i]);
      if (found == id.end()) throw Error("node '" + n.name + "' reads '" + n.inputs[i] + "', which no node made");
      inputs.push_back(i == 0 && quantized_nodes.count(n.name) ? qdq(n.inputs[i]) : found->second);
    }
    if (n.outputs.size() != 1) throw Error("node '" + n.name + "' has " + std::to_string(n.outputs.size()) + " outputs");
    id[n.outputs[0]] = b.node(n.name, n.params, std::move(inputs), n.outputs[0]);
  }
  for (const TensorInfo& t : model.outputs()) b.output(id.at(t.name));
  return b.finish();
}

}  // namespace infer::quant
