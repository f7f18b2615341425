// The model zoo: DESIGN.md's exact architectures (lenet5, alexnet, vgg11, vgg16, dcgan, ebgan) built
// with the public ModelBuilder, with seeded He-style weights (byte-identical files for a given seed on
// every platform: the generator is specified here, not left to <random>) and BatchNorm layers with
// non-trivial running statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infer/model_builder.h"

namespace infer::zoo {

struct ZooOptions {
  uint64_t seed = 1;
  int image_size = 0;             // classifiers: input height = width; 0 = the architecture's own
  DType weight_dtype = DType::F32;
};

// The zoo's model names, in DESIGN.md order.
const std::vector<std::string>& names();

// Builds a zoo model; throws infer::Error for an unknown name or an image size too small for it.
ModelBuilder build(const std::string& name, const ZooOptions& options = {});

}  // namespace infer::zoo
