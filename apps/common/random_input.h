// Seeded random model inputs, the ones `infer` uses when no --input is given: N(0,1) latents for a
// generator, uniform [-1,1) otherwise, from SeededRandom (random.h: the same values on every platform).
// The Python package draws through the same code, so `infer --seed S` and Python agree exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/model.h"
#include "infer/tensor.h"

namespace infer {

// One tensor per entry of `infos` (shapes with the batch fixed), filled in order from one generator
// seeded with `seed`: standard normal (Box-Muller) when `latent`, else uniform in [-1, 1).
std::vector<Tensor> random_inputs(const std::vector<TensorInfo>& infos, bool latent, uint64_t seed);

}  // namespace infer
