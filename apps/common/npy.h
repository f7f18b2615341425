// NumPy .npy files for the apps: read (format 1.0 and 2.0, little-endian f4 / f8 / f2 converted to
// float, C order) and write (float32, format 1.0). Every length in a file is checked before use: a bad
// magic, an unsupported dtype or order, a header that lies about the data, or a truncated file is an
// infer::Error naming the file and what is wrong. Writes go through write_file_atomic (atomic_file.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atomic_file.h"  // write_file_atomic: every file the apps write
#include "infer/tensor.h"

namespace infer {

// Parses a whole .npy file held in memory; `origin` names it in error messages.
Tensor parse_npy(const std::vector<uint8_t>& bytes, const std::string& origin);
// Reads and parses a .npy file.
Tensor read_npy(const std::string& path);

// The .npy bytes of a float32 tensor (format 1.0, '<f4', C order).
std::vector<uint8_t> encode_npy(const Tensor& tensor);
// Writes encode_npy(tensor) to path through write_file_atomic.
void write_npy(const std::string& path, const Tensor& tensor);

// Reads a whole file; Error "cannot read '<path>': <reason>" when it cannot.
std::vector<uint8_t> read_file(const std::string& path);

}  // namespace infer
