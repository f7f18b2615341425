// libFuzzer target (e): IDX bytes, gzip-compressed or plain -> decode_idx (apps/infer/idx.cc, what
// `infer eval --images/--labels` reads): zlib inflate (bounded), header and size checks.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "idx.h"
#include "infer/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    infer::cli::decode_idx(std::vector<uint8_t>(data, data + size), "fuzz.idx");
  } catch (const infer::Error&) {
  }
  return 0;
}
