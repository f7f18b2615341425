// libFuzzer target (a): model bytes -> Model::from_bytes (identifier, FlatBuffers verifier, semantic
// validation, shape inference) -> a reference Session -> one run when small (run_model.h). A rejection
// is an infer::Error; a crash, a sanitizer report, a leak or any other exception is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "infer/infer.h"
#include "run_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const infer::Model model = infer::Model::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.fb");
    infer::fuzz::run_small_model(model);
  } catch (const infer::Error&) {
  }
  return 0;
}
