// The model loader: bytes of an .fb file -> a verified, validated detail::Graph. The FlatBuffers
// verifier runs first, then the semantic validation (indices, buffer sizes, dims, op parameters, order,
// declared shapes at batch 1). Any problem is an infer::Error "<origin>: <what>"; no input crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "graph.h"

namespace infer::detail {

// Parses `size` bytes at `data`. `keep` owns that memory; the graph keeps it alive because f32 weights
// are used in place. `origin` (a path or "<memory>") prefixes every error message.
std::shared_ptr<Graph> load_graph(std::shared_ptr<const void> keep, const uint8_t* data, size_t size,
                                  const std::string& origin);

// Maps the file read-only (mmap, MAP_PRIVATE) and parses it; unmapped when the graph is released.
// Unopenable, empty, non-regular files are Errors carrying strerror's text.
std::shared_ptr<Graph> load_graph_file(const std::string& path);

}  // namespace infer::detail
