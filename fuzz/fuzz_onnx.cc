// libFuzzer target (b): ONNX bytes -> the importer (protobuf parse, op conversion, constant folding;
// external data refused) -> the .fb bytes -> Model::from_bytes -> a reference Session -> one run when
// small (run_model.h). A rejection is an infer::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "infer/infer.h"
#include "onnx_import.h"
#include "run_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::vector<uint8_t> fb =
        infer::onnx_import::import_bytes(std::vector<uint8_t>(data, data + size), "fuzz.onnx", "").finish();
    infer::fuzz::run_small_model(infer::Model::from_bytes(fb, "fuzz.fb"));
  } catch (const infer::Error&) {
  }
  return 0;
}
