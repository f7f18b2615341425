// ONNX import: converts an ONNX model (what torch.onnx.export writes; opsets 7-18) into an infer
// ModelBuilder through the public API only. Untrusted input: the protobuf is parsed from a bounded
// buffer, every dims product and external-data range is checked, and every problem is an infer::Error
// with a one-line message. Ops outside the supported set fail together in ONE error listing each
// unsupported op type with its node names. The input's batch (symbolic or fixed) becomes -1; a fixed
// batch that cannot be told from another number keeps the model at that batch (metadata batch.fixed).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "infer/model_builder.h"

namespace infer::onnx_import {

struct ImportOptions {
  std::string name;  // model name; empty = the ONNX graph's name, else the file's stem
  // Extra metadata, applied after the ONNX metadata_props (so a key given here wins).
  std::vector<std::pair<std::string, std::string>> metadata;
  DType weight_dtype = DType::F32;
};

// Converts the ONNX file at `path`; external-data files are resolved relative to its folder.
ModelBuilder import_file(const std::string& path, const ImportOptions& options = {});

// Converts ONNX bytes held in memory; `origin` names them in messages and `base_dir` is where external
// data files are looked up ("" = external data is refused).
ModelBuilder import_bytes(const std::vector<uint8_t>& bytes, const std::string& origin,
                          const std::string& base_dir, const ImportOptions& options = {});

// The ONNX op types the importer understands (converted, folded or removed), sorted.
const std::vector<std::string>& supported_ops();

}  // namespace infer::onnx_import
