// SessionOptions::device (issue 29 must 2): a cuda Session runs on the GPU it names, whatever the calling
// thread's current device is, and leaves that current device as it was; each GPU's session gives the
// outputs of a session on GPU 0 bit for bit; a device the machine lacks is one Error. Skipped (one line)
// without a CUDA device; the multi-GPU cases need two or more GPUs and say so on one.
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "infer/infer.h"

using namespace infer;

namespace {
Model shipped(const std::string& name) { return Model::load(std::string(INFER_SOURCE_DIR) + "/models/" + name); }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

int current_device() {
  int d = -1;
  REQUIRE(cudaGetDevice(&d) == cudaSuccess);
  return d;
}

std::vector<Tensor> inputs_of(const Session& s) {
  std::vector<Tensor> in;
  for (const TensorInfo& t : s.inputs()) {
    Tensor x(t.shape);
    for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
    in.push_back(std::move(x));
  }
  return in;
}
}  // namespace

CUDA_TEST_CASE("device: every GPU runs the same outputs as GPU 0 and restores the caller's device") {
  const int n = device_count();
  if (n < 2) MESSAGE("one CUDA device: the cross-device cases run on device 0 only");
  for (const char* name : {"lenet5_fashion.fb", "ebgan_fashion.fb"}) {
    CAPTURE(name);
    const Model model = shipped(name);
    SessionOptions o;
    o.backend = "cuda";
    o.batch = 4;
    o.device = 0;
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    Session first(model, o);
    const std::vector<Tensor> in = inputs_of(first);
    const std::vector<Tensor> want = first.run(in);
    for (int d = 0; d < n; ++d) {
      CAPTURE(d);
      o.device = d;
      // The thread's current device is another one: creation, runs (also at another batch, planned on
      // first use) and destruction must all happen on device d, and leave the current device alone.
      const int other = (d + 1) % n;
      REQUIRE(cudaSetDevice(other) == cudaSuccess);
      {
        Session s(model, o);
        CHECK(current_device() == other);
        std::vector<Tensor> got = s.run(in);
        CHECK(current_device() == other);
        REQUIRE(got.size() == want.size());
        for (size_t k = 0; k < got.size(); ++k)
          CHECK(std::memcmp(got[k].data.data(), want[k].data.data(), got[k].data.size() * sizeof(float)) == 0);
        std::vector<Tensor> in2;
        for (const Tensor& t : in) {
          Shape sh = t.shape;
          sh[0] = 2;
          Tensor x(sh);
          std::memcpy(x.data.data(), t.data.data(), x.data.size() * sizeof(float));
          in2.push_back(std::move(x));
        }
        std::vector<Tensor> got2 = s.run(in2);
        CHECK(got2[0].shape[0] == 2);
        CHECK(current_device() == other);
        CHECK_THROWS_AS(s.run_device({}), Error);  // wrong input count: an Error, the device kept
        CHECK(current_device() == other);
      }
      CHECK(current_device() == other);
    }
  }
}

CUDA_TEST_CASE("device: a GPU the machine lacks, or a negative one, is one Error") {
  const Model model = shipped("lenet5_fashion.fb");
  SessionOptions o;
  o.backend = "cuda";
  o.device = device_count();
  CHECK_THROWS_WITH_AS(Session(model, o), doctest::Contains("no device"), Error);
  o.device = -2;
  CHECK_THROWS_AS(Session(model, o), Error);
}
