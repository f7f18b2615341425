// Smoke tests of `infer-bench` (built into the build root next to `infer`), run as a separate process:
// the Table-4 memory column reproduces the paper exactly (495,616 B for DCGAN layer 2, 35,534,592 B for
// the EB-GAN total) and the conventional variant's workspace holds at least that buffer; tiny op and
// model runs produce well-formed JSON covering every registered variant; the weights/outputs dumps equal
// the model's constants and an in-process Session run; bad input exits 2 with one "error:" line.
// No timing assertions: only that times were measured (finite, min <= median <= max).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "graph.h"
#include "infer/infer.h"
#include "infer/kernel.h"
#include "npy.h"
#include "test_util.h"
#include "zoo.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kBench = std::string(INFER_BINARY_DIR) + "/infer-bench";

using infer::test::quote;
using infer::test::Result;
using infer::test::run_shell;
using infer::test::slurp;
using infer::test::tmp;


// Runs infer-bench with args (already shell-safe: the tests pass plain words and scratch paths).
Result bench(const std::string& args) { return run_shell(kBench + " " + args); }

json read_json(const std::string& path) { return json::parse(slurp(path)); }

std::set<std::string> cpu_variants(const std::string& op) {
  std::set<std::string> names;
  for (const infer::KernelVariant* v : infer::KernelRegistry::global().variants("cpu", op))
    if (v->name != "reference") names.insert(v->name);
  return names;
}

// A result that ran has sane statistics; one that did not says why.
void check_result(const json& r) {
  CAPTURE(r.dump());
  if (!r.at("ran").get<bool>()) {
    CHECK(!r.at("note").get<std::string>().empty());
    return;
  }
  const json& t = r.at("time");
  const double med = t.at("median_ms"), lo = t.at("min_ms"), hi = t.at("max_ms");
  CHECK(std::isfinite(med));
  CHECK(lo >= 0);
  CHECK(lo <= med);
  CHECK(med <= hi);
  CHECK(r.at("flops").get<double>() > 0);
  CHECK(r.at("speedup").get<double>() > 0);
}

}  // namespace

TEST_CASE("infer-bench exists") {
  REQUIRE_MESSAGE(fs::exists(kBench), "build the infer-bench target first: " << kBench);
}

TEST_CASE("--table4 --memory-only reproduces the paper's memory column") {
  const std::string out = tmp("table4.json");
  const Result r = bench("--table4 --memory-only --json " + out);
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const json j = read_json(out);
  REQUIRE(j.at("layers").size() == 18);  // DCGAN 4 + ArtGAN 4 + GP-GAN 4 + EB-GAN 6

  // "DCGAN layer 2" is the generator's second layer: the first stride-2 one, 4x4x1024 -> 8x8x512.
  const json& dcgan2 = j["layers"][0];
  CHECK(dcgan2["model"] == "DCGAN");
  CHECK(dcgan2["n"] == 4);
  CHECK(dcgan2["c_in"] == 1024);
  CHECK(dcgan2["upsampled_bytes"].get<uint64_t>() == 495616u);  // 11 x 11 x 1024 x 4, Table 4

  uint64_t ebgan = 0;
  for (const json& t : j["totals"])
    if (t["model"] == "EB-GAN") ebgan = t["upsampled_bytes"];
  CHECK(ebgan == 35534592u);  // Table 4's EB-GAN total

  // The conventional kernel really allocates that buffer (its workspace holds at least it), and the
  // unified segregated kernel needs none.
  CHECK(j["upsampled_matches_paper"].get<bool>());
  for (const json& layer : j["layers"]) {
    CAPTURE(layer.dump());
    CHECK(layer["upsampled_bytes"] == layer["paper_upsampled_bytes"]);
    for (const json& v : layer["results"]) {
      if (!v["ran"].get<bool>()) continue;
      if (v["label"] == "conventional")
        CHECK(v["workspace_bytes"].get<uint64_t>() >= layer["upsampled_bytes"].get<uint64_t>());
      if (v["label"] == "segregated_unified") CHECK(v["workspace_bytes"].get<uint64_t>() == 0u);
    }
  }
  CHECK(r.out.find("495616") != std::string::npos);
  CHECK(r.out.find("35534592") != std::string::npos);
}

TEST_CASE("op benchmarks cover every registered variant") {
  struct Case {
    std::string op, args;
    double flops;  // the engine's cost model: a multiply-add counts 2
  };
  const std::vector<Case> cases{
      {"conv_transpose2d", "--input 1x6x5x5 --out-channels 4 --kernel 4 --stride 2 --padding 1",
       2.0 * 6 * 5 * 5 * 4 * 16},
      {"conv2d", "--input 2x3x9x9 --out-channels 5 --kernel 3 --padding 1", 2.0 * 2 * 5 * 9 * 9 * 3 * 9},
      {"conv_pool2d", "--input 1x4x8x8 --out-channels 4 --kernel 3 --padding 1 --pool 2", 0},
      {"dense", "--input 2x16 --out-features 8", 2.0 * 2 * 16 * 8},
      {"pool2d", "--input 1x3x8x8 --kernel 2 --stride 2 --pool-kind avg", 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.op);
    const std::string out = tmp("op_" + c.op + ".json");
    const Result r = bench("op " + c.op + " " + c.args + " --runs 3 --warmup 1 --json " + out);
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const json j = read_json(out);
    std::set<std::string> seen;
    for (const json& res : j["results"]) {
      seen.insert(res["label"].get<std::string>());
      check_result(res);
      if (res["ran"].get<bool>() && c.flops > 0) CHECK(res["flops"].get<double>() == doctest::Approx(c.flops));
    }
    CHECK(seen == cpu_variants(c.op));
    CHECK(j["environment"]["threads"].get<int>() >= 1);
  }
}

TEST_CASE("model benchmark, weights and outputs dumps") {
  const std::string fb = tmp("lenet5.fb");
  infer::zoo::build("lenet5").save(fb);
  const std::string out = tmp("model.json"), dump = tmp("io"), weights = tmp("weights");
  Result r = bench("model " + fb + " --runs 2 --warmup 1 --threads 1 --json " + out + " --dump " + dump);
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const json j = read_json(out);
  REQUIRE(!j["results"].empty());
  CHECK(j["results"][0]["label"] == "default");
  CHECK(j["results"][0]["ran"].get<bool>());
  for (const json& res : j["results"]) check_result(res);

  // The dumped output is the model's output on the dumped input.
  const infer::Model model = infer::Model::load(fb);
  infer::Session session(model);
  const infer::Tensor input = infer::read_npy(dump + "/input_0.npy");
  const infer::Tensor output = infer::read_npy(dump + "/output_0.npy");
  const std::vector<infer::Tensor> expect = session.run({input});
  CHECK(output.shape == expect[0].shape);
  CHECK(infer::test::rel_error(output.data, expect[0].data) <= 1e-6);

  // Every constant, under its tensor name, with its values.
  r = bench("weights " + fb + " --out " + weights);
  REQUIRE(r.code == 0);
  int constants = 0;
  for (const infer::detail::Value& v : model.graph().values) {
    if (!v.is_constant()) continue;
    ++constants;
    const infer::Tensor t = infer::read_npy(weights + "/" + v.name + ".npy");
    CHECK(t.shape == v.shape);
    CHECK(t.data == std::vector<float>(v.data, v.data + t.numel()));
  }
  CHECK(constants == 10);  // conv1, conv2, fc1, fc2, fc3: weight + bias each

  // --kernel holds in every timed session: "default" is the plan with the choice (a variant that
  // takes every node, and one on a single node by name), and the op's other variants keep the rest.
  r = bench("model " + fb + " --runs 1 --warmup 0 --threads 1 --no-variants --kernel dense=reference "
            "--kernel conv_pool2d:conv1=reference --json " + out);
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("dense=reference(3)") != std::string::npos);
  const json forced = read_json(out);
  int dense = 0, conv_reference = 0;
  for (const json& n : forced["nodes"]) {
    if (n["op"] == "dense") dense += n["variant"] == "reference" ? 1 : 100;
    if (n["op"] == "conv_pool2d") conv_reference += n["variant"] == "reference" ? 1 : 0;
  }
  CHECK(dense == 3);  // all three on reference
  CHECK(conv_reference == 1);
  CHECK(forced["results"][0]["label"] == "default");
  CHECK(forced["results"][0]["ran"].get<bool>());
}

TEST_CASE("bad input: exit 2 with one error line, usage errors exit 1") {
  auto check_error = [](const Result& r, const std::string& words) {
    CAPTURE(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.rfind("error: ", 0) == 0);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(r.err.find(words) != std::string::npos);
  };
  check_error(bench("op conv2d --input 1x3x8 --out-channels 4"), "4 dims");
  check_error(bench("op conv2d --input 1xAx8x8 --out-channels 4"), "bad shape");
  check_error(bench("op conv2d --input 1x3x8x8"), "--out-channels");
  check_error(bench("op conv2d --input 1x3x4x4 --out-channels 2 --kernel 9"), "");
  check_error(bench("op conv2d --input 1x3x8x8 --out-channels 2 --variant no_such --runs 1 --warmup 0"), "no_such");
  check_error(bench("model " + tmp("missing.fb")), "missing.fb");
  CHECK(bench("model " + tmp("missing.fb") + " --kernel conv2d").code == 1);  // not op=variant
  CHECK(bench("model " + tmp("missing.fb") + " --kernel conv2d=a --kernel conv2d=b").code == 1);  // twice
  check_error(bench("--table4 --memory-only --model NoGAN"), "NoGAN");
  CHECK(bench("").code == 1);  // no subcommand: help, usage error
  CHECK(bench("op conv9d --input 1x1x4x4").code == 1);
  CHECK(bench("--runs 0 --table4").code == 1);
}
