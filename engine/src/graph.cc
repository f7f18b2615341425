// Graph helpers: constants created after loading (passes) own their storage through Graph::storage.
#include "graph.h"

namespace infer::detail {

int Graph::add_constant(std::string value_name, Shape shape, std::vector<float> data) {
  auto owned = std::make_shared<std::vector<float>>(std::move(data));
  Value v;
  v.name = std::move(value_name);
  v.shape = std::move(shape);
  v.dtype = DType::F32;
  v.data = owned->data();
  storage.push_back(owned);
  values.push_back(std::move(v));
  return static_cast<int>(values.size()) - 1;
}

}  // namespace infer::detail
