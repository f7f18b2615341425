// Concurrent sessions on the GPU (issue 17): 8 threads, each with its own cuda Session (its own stream
// and CUDA graph) over one shared Model, running at the same time; outputs bit-identical to a
// single-threaded run, in fp32, tf32 and fp16. Skipped (one line) where there is no CUDA device.
#include <string>

#include "concurrency.h"
#include "cuda_test_util.h"
#include "infer/infer.h"

using namespace infer;

namespace {
Model shipped(const std::string& name) { return Model::load(std::string(INFER_SOURCE_DIR) + "/models/" + name); }
}  // namespace

CUDA_TEST_CASE("8 threads, one shared Model, a cuda Session each: outputs bit-identical to one thread") {
  for (const char* name : {"lenet5_fashion.fb", "ebgan_fashion.fb"})
    for (const Precision precision : {Precision::FP32, Precision::TF32, Precision::FP16}) {
      CAPTURE(name);
      CAPTURE(precision_name(precision));
      const Model model = shipped(name);
      SessionOptions options;
      options.backend = "cuda";
      options.precision = precision;
      options.batch = 4;
      test::check_concurrent_sessions(model, options, 8, 20);
    }
}
