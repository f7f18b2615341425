// Seeded random model inputs (random_input.h) from SeededRandom (random.h).
#include "random_input.h"

#include "random.h"

namespace infer {

std::vector<Tensor> random_inputs(const std::vector<TensorInfo>& infos, bool latent, uint64_t seed) {
  cli::SeededRandom random(seed);
  std::vector<Tensor> out;
  for (const TensorInfo& info : infos) {
    Tensor t(info.shape);
    for (float& x : t.data) x = latent ? random.normal() : random.uniform_pm1();
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace infer
