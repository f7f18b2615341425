// libFuzzer target (c): .npy bytes -> parse_npy (apps/common/npy.cc, what `infer --input x.npy` reads):
// header scanner, dtype and shape checks, conversion to float32. A rejection is an infer::Error.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "infer/error.h"
#include "npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    infer::parse_npy(std::vector<uint8_t>(data, data + size), "fuzz.npy");
  } catch (const infer::Error&) {
  }
  return 0;
}
