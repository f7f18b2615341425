// Checks of the inputs and output buffers callers hand a Session (session_io.h). Shapes must match the
// plan exactly (a different batch is resolved before, by batch.h); a null pointer is refused unless the
// tensor is empty.
#include "session_io.h"

#include <string>

#include <fmt/format.h>

#include "infer/error.h"

namespace infer::detail {

void check_inputs(const std::vector<TensorView>& in, const std::vector<TensorInfo>& want, const char* caller) {
  if (in.size() != want.size()) {
    std::string names;
    for (const TensorInfo& t : want) names += (names.empty() ? "'" : ", '") + t.name + "'";
    throw Error(fmt::format("{}: expected {} input(s) ({}), got {}", caller, want.size(), names, in.size()));
  }
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k].shape != want[k].shape)
      throw Error(fmt::format("input {} '{}': expected shape {}, got {}", k, want[k].name,
                              shape_str(want[k].shape), shape_str(in[k].shape)));
    if (!in[k].data && shape_numel(want[k].shape) > 0)
      throw Error(fmt::format("{}: input {} '{}' has no data (null pointer)", caller, k, want[k].name));
  }
}

std::vector<TensorView> input_views(const std::vector<Tensor>& in, const std::vector<TensorInfo>& want,
                                    const char* caller) {
  std::vector<TensorView> out;
  out.reserve(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    const auto numel = static_cast<uint64_t>(shape_numel(in[k].shape));
    if (in[k].data.size() != numel)
      throw Error(fmt::format("{}: input {}{}: shape {} needs {} floats, got {}", caller, k,
                              k < want.size() ? " '" + want[k].name + "'" : "", shape_str(in[k].shape),
                              numel, in[k].data.size()));
    out.push_back({in[k].shape, in[k].data.data()});
  }
  return out;
}

void check_outputs(const std::vector<TensorSpan>& out, const std::vector<TensorInfo>& want, const char* caller) {
  if (out.size() != want.size())
    throw Error(fmt::format("{}: expected {} output buffer(s), got {}", caller, want.size(), out.size()));
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k].shape != want[k].shape)
      throw Error(fmt::format("{}: output {} '{}' needs shape {}, got {}", caller, k, want[k].name,
                              shape_str(want[k].shape), shape_str(out[k].shape)));
    if (!out[k].data && shape_numel(out[k].shape) > 0)
      throw Error(fmt::format("{}: output {} '{}' has no buffer (null pointer)", caller, k, want[k].name));
  }
}

std::vector<TensorSpan> output_spans(std::vector<Tensor>& out) {
  std::vector<TensorSpan> s;
  s.reserve(out.size());
  for (Tensor& t : out) s.push_back({t.shape, t.data.data()});
  return s;
}

std::vector<Tensor> make_outputs(const std::vector<TensorInfo>& want) {
  std::vector<Tensor> out;
  out.reserve(want.size());
  for (const TensorInfo& t : want) out.emplace_back(t.shape);
  return out;
}

}  // namespace infer::detail
