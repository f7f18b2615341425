// IDX files (the MNIST / Fashion-MNIST container: big-endian magic 0x00 0x00 <type> <ndims>, ndims
// big-endian uint32 sizes, then the data in C order), gzip-compressed (inflated through zlib) or
// plain. Only unsigned-byte data (type 0x08) is accepted. Every field is checked before use: a bad
// magic, a zero or oversized dimension, a truncated or over-long file, or a broken gzip stream is an
// infer::Error naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace infer::cli {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {10000, 28, 28} for images, {10000} for labels
  std::vector<uint8_t> data;  // product(dims) bytes, C order
};

// Parses IDX bytes (already inflated); `origin` names the file in messages.
IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& origin);

// Parses IDX file bytes, inflating them first when they start with the gzip magic (1f 8b).
IdxArray decode_idx(std::vector<uint8_t> bytes, const std::string& origin);

// Reads an IDX file and decodes it (decode_idx).
IdxArray read_idx(const std::string& path);

}  // namespace infer::cli
