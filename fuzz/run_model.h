// What fuzz_model and fuzz_onnx do with a model that loaded: a reference-backend Session (passes,
// kernel selection, planning, the memory check under a 64 MiB limit), then one run on zero inputs when
// the work is small (arena <= 4 MiB, <= 20 MFLOP at batch 1), so each input takes milliseconds.
// infer::Error anywhere is an expected rejection; the caller catches it.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/infer.h"

namespace infer::fuzz {

inline void run_small_model(const Model& model) {
  if (model.flops(1) > 2e7) return;
  SessionOptions options;
  options.backend = "reference";
  options.max_memory_bytes = uint64_t(64) << 20;
  Session session(model, options);
  if (session.memory().arena_bytes > (uint64_t(4) << 20)) return;
  std::vector<Tensor> inputs;
  for (const TensorInfo& t : session.inputs()) inputs.emplace_back(t.shape);
  session.run(inputs);
}

}  // namespace infer::fuzz
