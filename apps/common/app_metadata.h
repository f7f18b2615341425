// The model metadata the apps use (docs/format.md: task, labels, input.mean/std/size, output.range,
// latent.dim), parsed and checked once. Shared by the `infer` CLI and the Python package so that both
// read a model's metadata the same way; a malformed value is an infer::Error naming the file and key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "infer/model.h"

namespace infer::cli {

// The metadata keys apps use, parsed and checked; absent keys keep these defaults.
struct AppMetadata {
  std::string task;                 // "classifier", "generator" or "" (anything else)
  std::vector<std::string> labels;  // one per class, from the newline-separated "labels"
  std::vector<float> mean, std;     // per channel, on pixels / 255
  std::optional<std::pair<int64_t, int64_t>> input_size;  // H, W
  float range_lo = -1.f, range_hi = 1.f;                  // a generator's output range
  int64_t latent_dim = 0;                                 // 0 = not given
};

// Reads and validates the metadata of `model` (loaded from `path`, named in messages).
AppMetadata read_metadata(const Model& model, const std::string& path);

}  // namespace infer::cli
