// Bring your own model (issue 14): real torchvision classifiers and GAN generators, exported by
// tests/golden/make_byom.py (the byom_data ctest fixture, into BYOM_DIR) at batch 1 and a fixed batch of
// 2 or 3, opsets 13 and 17 (upsampling generators also 9, 10), converted by the importer's library entry
// point and run on every backend this build has, at each batch the manifest lists, within rel err 1e-4
// of PyTorch's float64 forward. kExpected is the ONE table of what is supported, checked both ways.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "infer/infer.h"
#include "npy.h"
#include "onnx_import.h"
#include "test_util.h"

using namespace infer;

namespace {

const std::string kByom = BYOM_DIR;

// model -> "supported", or "unsupported: <why>" (what onnx2fb reports first, then what the importer
// would meet next). Keep it true: the test fails when a row is wrong either way.
const std::map<std::string, std::string> kExpected{
    {"resnet18", "supported"},
    {"alexnet", "supported"},
    {"dcgan_examples", "supported"},
    {"linear_gen", "supported"},
    {"unet", "supported"},
    {"mobilenet_v2", "supported"},
    {"mobilenet_v3_small", "supported"},
    {"efficientnet_b0", "supported"},
    {"squeezenet1_1", "supported"},
    {"googlenet", "supported"},
    {"upsample_gen", "supported"},      // opsets 9 (Upsample) and 10 (Resize-10) too
    {"pixel_shuffle_gen", "supported"},  // opsets 9, 10: PixelShuffle as Reshape -> Transpose -> Reshape
    {"resnet_gen", "supported"},
    // The batch-2 exports name the batch of the channel shuffle's Reshapes as the number 2, which is
    // also a group count and, in the last stage, the height and width: the chain is per-sample, so
    // the leading 2 is the batch.
    {"shufflenet_v2_x0_5", "supported"},
};

const std::vector<std::string> kBackends{"reference", "cpu", "cuda"};
constexpr double kTolerance = 1e-4;

// The first `rows` samples of a batch tensor.
Tensor head(const Tensor& t, int64_t rows) {
  Shape s = t.shape;
  const int64_t per = t.numel() / s[0];
  s[0] = rows;
  return Tensor(s, std::vector<float>(t.data.begin(), t.data.begin() + rows * per));
}

// One export on every backend at every batch it lists: "" when all match, else what went wrong.
std::string check_export(const nlohmann::json& e, const Tensor& input, const Tensor& expected) {
  const std::string path = kByom + "/" + e["onnx"].get<std::string>();
  std::unique_ptr<Model> model;
  try {
    model = std::make_unique<Model>(Model::from_bytes(onnx_import::import_file(path).finish()));
  } catch (const Error& err) {
    return err.what();
  }
  if (model->inputs().size() != 1 || model->inputs()[0].shape.empty() || model->inputs()[0].shape[0] != -1)
    return path + ": the input did not get the batch dimension -1";
  for (const auto& b : e["run_batches"]) {
    const int64_t batch = b.get<int64_t>();
    for (const std::string& backend : kBackends) {
      SessionOptions o;
      o.backend = backend;
      o.batch = batch;
      std::vector<Tensor> out;
      try {
        Session s(*model, o);
        out = s.run({head(input, batch)});
      } catch (const Error& err) {
        if (backend == "cuda" && std::string(err.what()).find("CUDA") != std::string::npos) continue;
        return path + ": batch " + std::to_string(batch) + " on " + backend + ": " + err.what();
      }
      const Tensor want = head(expected, batch);
      if (out.size() != 1 || out[0].numel() != want.numel())
        return path + ": batch " + std::to_string(batch) + " on " + backend + ": wrong output size";
      const double err = test::rel_error(out[0].data, want.data);
      if (!test::all_finite(out[0].data) || !(err <= kTolerance))
        return path + ": batch " + std::to_string(batch) + " on " + backend + ": rel err " +
               std::to_string(err) + " > 1e-4";
    }
  }
  return "";
}

}  // namespace

TEST_CASE("byom: torchvision classifiers and GAN generators match PyTorch, as kExpected says") {
  std::ifstream f(kByom + "/manifest.json");
  REQUIRE_MESSAGE(f.good(), "no byom golden data: run the byom_data ctest fixture (tests/golden/make_byom.py)");
  const nlohmann::json m = nlohmann::json::parse(f);
  std::set<std::string> seen;
  int supported = 0, unsupported = 0;
  for (const auto& c : m["models"]) {
    const std::string name = c["name"];
    CAPTURE(name);
    seen.insert(name);
    const auto row = kExpected.find(name);
    REQUIRE_MESSAGE(row != kExpected.end(), "model " << name << " is missing from kExpected (tests/test_byom.cc)");
    const bool want_supported = row->second == "supported";
    const Tensor input = read_npy(kByom + "/" + c["input"].get<std::string>());
    const Tensor expected = read_npy(kByom + "/" + c["output"].get<std::string>());
    std::vector<std::string> failures;
    for (const auto& e : c["exports"]) {
      const std::string why = check_export(e, input, expected);
      if (!why.empty()) failures.push_back(why);
    }
    if (want_supported) {
      for (const std::string& why : failures) FAIL_CHECK("supported model " << name << " failed: " << why);
      if (failures.empty()) ++supported;
    } else {
      CHECK_MESSAGE(!failures.empty(), "model " << name << " is listed as '" << row->second
                                                << "' but every export now converts and matches PyTorch: "
                                                   "mark it supported in kExpected");
      // The reason's first word (an op type) must be in what the importer reports: keeps it honest.
      const std::string reason = row->second.substr(row->second.find(": ") + 2);
      const std::string first_op = reason.substr(0, reason.find_first_of(" ,(;"));
      bool named = false;
      for (const std::string& why : failures) named = named || why.find(first_op) != std::string::npos;
      CHECK_MESSAGE(named, "kExpected says " << name << " fails at " << first_op << ", but the errors do not say so");
      std::set<std::string> distinct(failures.begin(), failures.end());
      std::printf("byom: %s (%s):\n", name.c_str(), row->second.c_str());
      for (std::string why : distinct) {  // one line per export, named relative to BYOM_DIR
        if (why.rfind(kByom + "/", 0) == 0) why.erase(0, kByom.size() + 1);
        std::printf("  %s\n", why.c_str());
      }
      ++unsupported;
    }
  }
  for (const auto& [name, status] : kExpected)
    CHECK_MESSAGE(seen.count(name), "kExpected lists " << name << " but make_byom.py did not write it");
  std::printf("byom: %d supported and matching, %d known-unsupported (of %zu models; golden data made in %s s "
              "with torch %s)\n",
              supported, unsupported, m["models"].size(), m["seconds"].dump().c_str(),
              m["torch"].get<std::string>().c_str());
}
