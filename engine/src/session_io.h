// Checks of what a caller hands a Session, shared by run(), run_into(), output_shapes(), profile() and
// benchmark(): input views against the planned inputs (count, shape, data), run()'s Tensors turned into
// views (each holding as many floats as its shape says), and run_into()'s output buffers. Every failure
// is one infer::Error naming the call, the tensor's index and name, and what was expected.
#pragma once

#include <vector>

#include "infer/session.h"
#include "infer/tensor.h"

namespace infer::detail {

void check_inputs(const std::vector<TensorView>& in, const std::vector<TensorInfo>& want, const char* caller);
std::vector<TensorView> input_views(const std::vector<Tensor>& in, const std::vector<TensorInfo>& want,
                                    const char* caller);
void check_outputs(const std::vector<TensorSpan>& out, const std::vector<TensorInfo>& want, const char* caller);
std::vector<TensorSpan> output_spans(std::vector<Tensor>& out);
std::vector<Tensor> make_outputs(const std::vector<TensorInfo>& want);

}  // namespace infer::detail
