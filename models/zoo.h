// The model zoo: docs/design.md's exact architectures (lenet5, alexnet, vgg11, vgg16, dcgan, ebgan) built
// with the public ModelBuilder, with seeded He-style weights (byte-identical files for a given seed on
// every platform: the generator is specified here, not left to <random>) and BatchNorm layers with
// non-trivial running statistics. A WeightSource replaces the seeded weights with trained ones (the
// shipped models/*.fb); the zoo itself does no file I/O: the caller hands the arrays in.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "infer/model_builder.h"
#include "infer/tensor.h"

namespace infer::zoo {

// Trained weights: called once per constant with its PyTorch state_dict key and the shape the
// architecture needs; returns the values. Zoo names are PyTorch's (conv1.weight, tconv5.bias, ...)
// except BatchNorm's .scale/.mean/.var, asked for as .weight/.running_mean/.running_var. A tensor of
// another shape, or a non-finite value (or one beyond float16's range when storing f16), is an Error.
using WeightSource = std::function<Tensor(const std::string& pytorch_key, const Shape& shape)>;

struct ZooOptions {
  uint64_t seed = 1;
  int image_size = 0;             // classifiers: input height = width; 0 = the architecture's own
  DType weight_dtype = DType::F32;
  WeightSource weights;           // empty: seeded random weights
};

// The zoo's model names, in docs/design.md order.
const std::vector<std::string>& names();

// The PyTorch state_dict key of a zoo constant name (BatchNorm: .scale -> .weight, .mean ->
// .running_mean, .var -> .running_var; every other name is its own key).
std::string pytorch_key(const std::string& zoo_name);

// Builds a zoo model; besides names() it knows `ebgan_fashion`, the trained generator that ships
// (models/README.md: z 100 -> 512, 256, 128, 64 -> 1x64x64, tanh). Throws infer::Error for an
// unknown name, an image size too small for it, or bad trained weights.
ModelBuilder build(const std::string& name, const ZooOptions& options = {});

}  // namespace infer::zoo
