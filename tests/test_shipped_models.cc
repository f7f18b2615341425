// The trained models that ship (models/lenet5_fashion.fb, models/ebgan_fashion.fb; models/README.md)
// load, validate, carry their metadata, and reproduce the training script's exported outputs
// (models/testdata/) on the CPU backends "reference" and "cpu". Tolerances (relative error
// ||out - ref|| / ||ref||): LeNet-5 stores float32 weights, so 1e-5 as for any fp32 kernel; the EB-GAN
// generator stores float16 weights (PyTorch ran float32), so 1e-2, docs/design.md's fp16 bound. Only
// committed files are used (.data/ is not in CI). Also the zoo's trained-weights hook that exported them.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "infer/infer.h"
#include "npy.h"
#include "test_util.h"
#include "zoo.h"

using namespace infer;
using infer::test::all_finite;
using infer::test::rel_error;

namespace {

const std::string kModels = std::string(INFER_SOURCE_DIR) + "/models/";
const std::string kTestdata = kModels + "testdata/";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `model` on `input` (its batch is the session's) and returns the single output.
Tensor run_on(const Model& model, const std::string& backend, const Tensor& input) {
  SessionOptions o;
  o.backend = backend;
  o.batch = input.shape.at(0);
  Session session(model, o);
  REQUIRE(session.inputs().size() == 1);
  REQUIRE(session.inputs()[0].shape == input.shape);
  std::vector<Tensor> out = session.run({input});
  REQUIRE(out.size() == 1);
  return out[0];
}

}  // namespace

TEST_CASE("lenet5_fashion.fb: metadata and structure") {
  const Model model = Model::load(kModels + "lenet5_fashion.fb");
  CHECK(model.meta("task") == "classifier");
  CHECK(model.meta("labels") ==
        "T-shirt/top\nTrouser\nPullover\nDress\nCoat\nSandal\nShirt\nSneaker\nBag\nAnkle boot");
  CHECK(model.meta("input.mean") == "0.5");
  CHECK(model.meta("input.std") == "0.5");
  CHECK(model.meta("input.size") == "28,28");
  CHECK(model.inputs().size() == 1);
  CHECK(model.inputs()[0].shape == Shape{-1, 1, 28, 28});
  CHECK(model.outputs()[0].shape == Shape{-1, 10});
  // 61,706 float32 parameters (models/README.md).
  CHECK(model.weight_bytes() == 61706u * 4u);
  CHECK(model.description().find("89.37") != std::string::npos);
}

TEST_CASE("ebgan_fashion.fb: metadata, structure, size") {
  const Model model = Model::load(kModels + "ebgan_fashion.fb");
  CHECK(model.meta("task") == "generator");
  CHECK(model.meta("output.range") == "-1,1");
  CHECK(model.meta("latent.dim") == "100");
  CHECK(model.inputs()[0].shape == Shape{-1, 100, 1, 1});
  CHECK(model.outputs()[0].shape == Shape{-1, 1, 64, 64});
  // 3,574,657 parameters (BN scale and bias included) + BN's running mean and variance, float16.
  const uint64_t params = 3574657u + 2u * (512 + 256 + 128 + 64);
  CHECK(model.weight_bytes() == params * 2u);
  std::ifstream f(kModels + "ebgan_fashion.fb", std::ios::binary | std::ios::ate);
  CHECK(static_cast<uint64_t>(f.tellg()) <= 8u * 1000u * 1000u);
}

TEST_CASE("lenet5_fashion.fb reproduces PyTorch's logits (reference and cpu)") {
  const Model model = Model::load(kModels + "lenet5_fashion.fb");
  const Tensor inputs = read_npy(kTestdata + "lenet5/inputs.npy");
  const Tensor logits = read_npy(kTestdata + "lenet5/logits.npy");
  const std::vector<uint8_t> predictions = read_bytes(kTestdata + "lenet5/predictions.bin");
  REQUIRE(inputs.shape == Shape{8, 1, 28, 28});
  REQUIRE(logits.shape == Shape{8, 10});
  REQUIRE(predictions.size() == 10000);
  for (const std::string& backend : std::vector<std::string>{"reference", "cpu"}) {
    CAPTURE(backend);
    const Tensor out = run_on(model, backend, inputs);
    REQUIRE(out.shape == logits.shape);
    CHECK(rel_error(out.data, logits.data) <= 1e-5);
    for (int r = 0; r < 8; ++r) {
      int best = 0;
      for (int c = 1; c < 10; ++c)
        if (out.data[r * 10 + c] > out.data[r * 10 + best]) best = c;
      CHECK(best == predictions[r]);
    }
  }
}

TEST_CASE("ebgan_fashion.fb reproduces PyTorch's images within the fp16 tolerance (reference, cpu)") {
  const Model model = Model::load(kModels + "ebgan_fashion.fb");
  const Tensor z = read_npy(kTestdata + "ebgan/z.npy");
  const Tensor images = read_npy(kTestdata + "ebgan/images.npy");
  REQUIRE(z.shape == Shape{8, 100, 1, 1});
  REQUIRE(images.shape == Shape{8, 1, 64, 64});
  for (const std::string& backend : std::vector<std::string>{"reference", "cpu"}) {
    CAPTURE(backend);
    const Tensor out = run_on(model, backend, z);
    REQUIRE(out.shape == images.shape);
    const double err = rel_error(out.data, images.data);
    MESSAGE(backend << ": relative error " << err);
    CHECK(err <= 1e-2);
    CHECK(all_finite(out.data));
  }
}

TEST_CASE("zoo weights hook: PyTorch keys, shape and range checks") {
  CHECK(zoo::pytorch_key("bn2.scale") == "bn2.weight");
  CHECK(zoo::pytorch_key("bn2.bias") == "bn2.bias");
  CHECK(zoo::pytorch_key("bn2.mean") == "bn2.running_mean");
  CHECK(zoo::pytorch_key("bn2.var") == "bn2.running_var");
  CHECK(zoo::pytorch_key("tconv5.weight") == "tconv5.weight");

  // ebgan_fashion asks for exactly the training script's state_dict keys (models/README.md).
  std::vector<std::string> asked;
  zoo::ZooOptions o;
  o.weight_dtype = DType::F16;
  o.weights = [&](const std::string& key, const Shape& shape) {
    asked.push_back(key);
    return Tensor(shape, std::vector<float>(size_t(shape_numel(shape)), 0.5f));
  };
  const Model m = Model::from_bytes(zoo::build("ebgan_fashion", o).finish());
  std::vector<std::string> expected;
  for (int i = 1; i <= 4; ++i) {
    const std::string t = "tconv" + std::to_string(i), b = "bn" + std::to_string(i);
    expected.insert(expected.end(), {t + ".weight", b + ".weight", b + ".bias", b + ".running_mean",
                                     b + ".running_var"});
  }
  expected.insert(expected.end(), {"tconv5.weight", "tconv5.bias"});
  CHECK(asked == expected);
  CHECK(m.outputs()[0].shape == Shape{-1, 1, 64, 64});
  CHECK(m.description().find("trained weights (f16)") != std::string::npos);

  zoo::ZooOptions wrong = o;
  wrong.weights = [](const std::string&, const Shape& shape) {
    Shape s = shape;
    s.back() += 1;
    return Tensor(s);
  };
  CHECK_THROWS_WITH_AS(zoo::build("lenet5", wrong), doctest::Contains("has shape"), Error);
  zoo::ZooOptions huge = o;
  huge.weights = [](const std::string&, const Shape& shape) {
    return Tensor(shape, std::vector<float>(size_t(shape_numel(shape)), 1e6f));
  };
  CHECK_THROWS_WITH_AS(zoo::build("lenet5", huge), doctest::Contains("not finite in f16"), Error);
}
