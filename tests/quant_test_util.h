// What the quantization tests share (test_quantized_conv.cc, test_cuda_quantized.cc): a float model
// quantized the way `infer quantize` does it (apps/common/quantizer.h: its plan and rewrite), with
// min-max ranges observed on the cpu over a calibration batch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "infer/infer.h"
#include "quantizer.h"

namespace infer::test {

inline std::vector<uint8_t> quantized_model(const Model& model, const Tensor& calib, DType act) {
  quant::Options o;
  o.activation = act;
  const quant::Plan plan = quant::plan(model, o);
  SessionOptions so;
  so.backend = "cpu";
  for (const std::string& v : plan.activations)
    if (v != "image") so.extra_outputs.push_back(v);
  Session fs(model, so);
  const std::vector<Tensor> outs = fs.run({calib});
  std::map<std::string, std::pair<float, float>> ranges;
  for (const std::string& v : plan.activations) {
    quant::Observer ob;
    const auto at = std::find(so.extra_outputs.begin(), so.extra_outputs.end(), v);
    const Tensor& t = v == "image" ? calib : outs.at(1 + size_t(at - so.extra_outputs.begin()));
    ob.add(t.data.data(), t.numel());
    ranges[v] = ob.range(quant::Method::MinMax, 0);
  }
  return quant::rewrite(model, plan, ranges, o, "test", {});
}

}  // namespace infer::test
