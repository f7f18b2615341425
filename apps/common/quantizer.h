// Post-training static quantization of a float model (`infer quantize`, issue 30): statistics of the
// activations over a calibration set (Observer), a clipping range per tensor by min-max, percentile or
// entropy (TensorRT's KL-divergence search), and the rewrite into a QDQ model of the form onnx2fb
// imports from ONNX Runtime's quantize_static: int8 weights per output channel (symmetric, zero point
// 0) behind dequantize_linear, a quantize_linear -> dequantize_linear pair per tensor on the data input
// of every conv2d / conv_pool2d / conv_transpose2d / dense, biases and everything else float32.
// Public headers only (apps/common); names of nodes and values are kept, so both models compare by name.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "infer/model.h"

namespace infer::quant {

enum class Method { MinMax, Percentile, Entropy };
Method parse_method(const std::string& name);  // "minmax" | "percentile" | "entropy"; Error otherwise
const char* method_name(Method method);

// What one tensor held over every batch it was shown: its min and max and a histogram of |x| over
// [0, amax] in kBins bins, re-binned (counts moved by bin centre) whenever a batch widens amax.
class Observer {
 public:
  static constexpr int kBins = 2048;
  void add(const float* x, int64_t n);  // non-finite values are counted apart and otherwise ignored
  int64_t count() const { return count_; }
  int64_t nonfinite() const { return nonfinite_; }
  float min() const { return count_ ? float(min_) : 0.f; }
  float max() const { return count_ ? float(max_) : 0.f; }
  float amax() const { return float(amax_); }
  const std::vector<double>& histogram() const { return hist_; }
  // The clipping range [lo, hi], lo <= 0 <= hi: min-max, or |x| clipped at the threshold the method
  // finds (percentile: the `percentile` % point of |x|; entropy: the KL-optimal threshold over 128
  // levels), intersected with [min, max].
  std::pair<float, float> range(Method method, double percentile) const;
  float percentile_threshold(double percentile) const;
  float entropy_threshold() const;

 private:
  double min_ = 0, max_ = 0, amax_ = 0;
  int64_t count_ = 0, nonfinite_ = 0;
  std::vector<double> hist_;
};

// Scale and zero point of a per-tensor activation range: u8 asymmetric (scale = (hi - lo) / 255,
// zero point round(-lo / scale)) or i8 symmetric (scale = max(|lo|, |hi|) / 127, zero point 0). A
// range of zero width gets scale 1 (quantize_linear needs a scale > 0).
struct QuantParams {
  float scale = 1.f;
  int zero_point = 0;
};
QuantParams activation_params(float lo, float hi, DType type);

// Symmetric int8 per slice along `axis` of a weight: scale[c] = max |w| of slice c / qmax (1 for an
// all-zero slice), q = round_half_even(w / scale) clamped to [-qmax, qmax]; qmax 127, or 64 with
// reduce_range (7-bit weights, ONNX Runtime's reduce_range: what the CPU's vpmaddubsw GEMM takes).
struct QuantizedWeight {
  std::vector<float> q;      // integers, as floats (ModelBuilder::constant stores them as I8)
  std::vector<float> scale;  // [shape[axis]]
};
QuantizedWeight quantize_weight(const float* w, const Shape& shape, int axis, bool reduce_range = false);

struct Options {
  Method method = Method::MinMax;
  double percentile = 99.99;
  DType activation = DType::U8;   // U8 (asymmetric) or I8 (symmetric)
  bool reduce_range = false;      // weights in [-64, 64] (quantize_weight)
  std::set<std::string> exclude;  // node names kept in float
};

// What a model's quantization needs: the nodes it quantizes (execution order) and the values whose
// ranges they need (their data inputs; model inputs among them), each once. An Error when the model
// is already quantized, or names an --exclude node it lacks.
struct Plan {
  struct Node {
    std::string name, op, input, output, weight;
    int axis = 0;  // the weight's output-channel axis (conv_transpose2d: 1)
  };
  std::vector<Node> nodes;
  std::vector<std::string> activations;
};
Plan plan(const Model& model, const Options& options);

// The QDQ model as a file. `ranges` holds a [lo, hi] for every Plan::activations entry; `metadata`
// entries are added to (or replace) the model's own.
std::vector<uint8_t> rewrite(const Model& model, const Plan& plan,
                             const std::map<std::string, std::pair<float, float>>& ranges, const Options& options,
                             const std::string& producer, const std::map<std::string, std::string>& metadata);

}  // namespace infer::quant
