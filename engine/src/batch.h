// The batch a session runs at (SessionOptions::batch). Every op keeps dim 0 as the batch (axes >= 1,
// Reshape keeps it, a constant never spans it), so a model whose inputs have a leading -1 runs at any
// batch, and one built at a fixed batch B (no -1) runs at B by default and at any other batch once its
// activations' leading size is the batch again, unless its `batch.fixed` metadata says why its
// producer kept B. Why a batch cannot apply is one line.
#pragma once

#include <cstdint>
#include <vector>

#include "graph.h"
#include "infer/tensor.h"

namespace infer::detail {

// The batch a session of `graph` runs at for SessionOptions::batch `requested`: itself when >= 1; for
// 0, the model's own (the inputs' fixed leading size when none has a -1, else 1). An Error for < 0.
int64_t resolve_batch(const Graph& graph, int64_t requested);

// Makes `graph` (a session's copy) ready to be shaped at `batch`: unchanged when an input has a leading
// -1 or the inputs already start with `batch`; else every activation's leading size becomes -1. An
// Error, one line naming the input, when the model keeps a fixed batch (`batch.fixed`) or its inputs'
// leading sizes differ.
void free_batch(Graph& graph, int64_t batch);

// Per graph input: whether its leading size is the batch (a leading -1, or every input when none has
// one): the inputs Session::run reads the batch from.
std::vector<bool> batch_inputs(const Graph& graph);

// The batch of inputs `in` for a session whose inputs are `want` (at its batch) when they differ from
// them only in the leading size of the inputs that carry the batch (`carries`), all by the same
// size; else 0 (they are the session's shapes, or wrong: the session's input check says how).
int64_t batch_of_inputs(const std::vector<TensorView>& in, const std::vector<TensorInfo>& want,
                        const std::vector<bool>& carries);

}  // namespace infer::detail
