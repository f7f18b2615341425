// Concurrent sessions on the host backends (issue 17): 8 threads, each with its own Session over one
// shared Model, outputs bit-identical to a single-threaded run, for the shipped LeNet-5 (conv + pool
// fused, dense) and EB-GAN generator (transposed convolutions) on cpu, and LeNet-5 on reference.
// `make test-tsan` runs this under ThreadSanitizer.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "concurrency.h"
#include "infer/infer.h"

using namespace infer;

namespace {
constexpr int kThreads = 8;
Model shipped(const std::string& name) { return Model::load(std::string(INFER_SOURCE_DIR) + "/models/" + name); }
}  // namespace

TEST_CASE("8 threads, one shared Model, a Session each: cpu outputs bit-identical to one thread") {
  for (const char* name : {"lenet5_fashion.fb", "ebgan_fashion.fb"}) {
    CAPTURE(name);
    const Model model = shipped(name);
    SessionOptions options;
    options.backend = "cpu";
    options.batch = 2;
    test::check_concurrent_sessions(model, options, kThreads, 3);
  }
}

TEST_CASE("8 threads on the reference backend (plain loops): bit-identical to one thread") {
  const Model model = shipped("lenet5_fashion.fb");
  SessionOptions options;
  options.backend = "reference";
  test::check_concurrent_sessions(model, options, kThreads, 2);
}

TEST_CASE("sessions outlive the Model they were made from, on other threads") {
  std::vector<Tensor> expected, got;
  std::vector<Tensor> in;
  std::unique_ptr<Session> session;
  {
    const Model model = shipped("lenet5_fashion.fb");
    SessionOptions options;
    options.backend = "cpu";
    session = std::make_unique<Session>(model, options);
    in = test::thread_inputs(*session, 7);
    expected = session->run(in);
  }  // the Model is gone; the session keeps what it needs
  std::thread([&] { got = session->run(in); }).join();
  CHECK(test::bit_identical(got, expected));
}
