// Bit-identical outputs and plans across restructurings (issue 28). Every zoo model (classifiers at
// small image sizes), the shipped models, a builder-made block model (residual and squeeze-excite
// fusions, concat, grouped and transposed convolutions) and, when their ctest fixtures have run, the
// ONNX golden nets and the real architectures (tests/golden/make_golden.py, make_byom.py) run on the
// reference backend and on cpu at each ISA level (SessionOptions::cpu_isa: baseline, avx2, avx512;
// a level this CPU lacks is skipped) with fixed seeds. Each run must reproduce, exactly, what is saved
// in tests/data/bit_identical/<case>.txt, one section per config: the pass log, every node's kernel
// variant, layout and ISA, the memory report and every planned tensor's offset, and each output's
// shape, FNV-1a hash of its float32 bits and sum. Outputs of at most kSavedFloats values are also
// saved, concatenated, in <case>.npy, so that a mismatch says how far off it is.
//
// Regenerate the data with ONE command (on a machine with AVX-512, with torch for the fixtures):
//     make bit-identical-data
// A commit that changes results on purpose (a kernel's arithmetic, a new variant or heuristic, a
// pass, the planner) must regenerate the data in the same commit and say so in its message; a
// commit that restructures must not need to.
// What else changes cpu results is pinned by ctest and the make target, and checked here: the thread
// count (OMP_NUM_THREADS=2: the transposed convolutions' sums depend on it) and OpenBLAS's kernels
// (OPENBLAS_CORETYPE=Haswell: OpenBLAS picks them by CPU model otherwise; any AVX2 CPU runs these).
// Some workspaces are sized per processor (depthwise conv2d), so on a machine with another number of
// processors than the one that saved the data, the plan lines are not compared, only the outputs.
// The cpu kernels' output bits also depend on how the library was compiled (the data is saved from a
// Release build; ASan's RelWithDebInfo -O2 vectorises some loops differently): in any other build
// (INFER_BIT_IDENTICAL_EXACT 0, set by tests/CMakeLists.txt) cpu outputs are compared within 1e-5
// relative instead of bit for bit; plans, and the reference backend's outputs, still exactly.
// Golden and byom cases carry a fingerprint of the imported model and input: where the fixture made
// different data (another torch version), those cases are skipped with a message, not failed.
#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "graph.h"
#include "infer/infer.h"
#include "npy.h"
#include "onnx_import.h"
#include "plan.h"
#include "test_util.h"
#include "zoo.h"

using namespace infer;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(INFER_SOURCE_DIR) + "/tests/data/bit_identical";
constexpr int64_t kSavedFloats = 4096;  // outputs up to this many values are also saved as .npy

// The variables that pin cpu arithmetic (see the header), as ctest and `make bit-identical-data` set them.
const std::vector<std::pair<const char*, const char*>> kPinned{{"OMP_NUM_THREADS", "2"},
                                                               {"OPENBLAS_CORETYPE", "Haswell"}};

// Processors this process may run on (what omp_get_num_procs() reports, which sizes some workspaces).
int processors() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

bool write_mode() {
  const char* w = std::getenv("INFER_BIT_IDENTICAL_WRITE");
  return w && *w && std::string(w) != "0";
}

struct Config {
  std::string name, backend;
  CpuIsa isa;
};
const std::vector<Config> kConfigs{{"reference", "reference", CpuIsa::Baseline},
                                   {"cpu-baseline", "cpu", CpuIsa::Baseline},
                                   {"cpu-avx2", "cpu", CpuIsa::Avx2},
                                   {"cpu-avx512", "cpu", CpuIsa::Avx512}};

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

uint64_t hash_floats(const std::vector<float>& v, uint64_t h = 1469598103934665603ull) {
  return fnv1a(v.data(), v.size() * sizeof(float), h);
}

// The model as the engine receives it (node names and ops, value names and shapes, every constant's
// bits) and the inputs: equal fingerprints mean the engine was given the same work.
uint64_t fingerprint(const Model& model, const std::vector<Tensor>& inputs) {
  uint64_t h = 1469598103934665603ull;
  for (const ModelNode& n : model.nodes()) {
    const std::string s = n.name + ":" + n.op;
    h = fnv1a(s.data(), s.size(), h);
  }
  for (const auto& v : model.graph().values) {
    const std::string s = v.name + "=" + shape_str(v.shape);
    h = fnv1a(s.data(), s.size(), h);
    if (v.is_constant()) h = fnv1a(v.data, sizeof(float) * static_cast<size_t>(shape_numel(v.shape)), h);
  }
  for (const Tensor& t : inputs) h = hash_floats(t.data, h);
  return h;
}

// Everything a session decided and computed, one fact per line. Outputs of at most kSavedFloats
// values are appended to `saved` and their line says where ("saved OFFSET").
std::string describe(const Session& s, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                     std::vector<float>& saved) {
  std::string out =
      fmt::format("session {} batch {} isa {}\n", s.backend(), s.batch(), cpu_isa_name(s.cpu_isa()));
  for (size_t k = 0; k < inputs.size(); ++k)
    out += fmt::format("input {} {} {:016x}\n", k, shape_str(inputs[k].shape), hash_floats(inputs[k].data));
  for (const std::string& line : s.passes()) out += "pass " + line + "\n";
  for (const NodeInfo& n : s.nodes()) {
    std::string fused;
    for (const std::string& f : n.fused) fused += (fused.empty() ? "" : "+") + f;
    out += fmt::format("node {} {} {} {} {} {} ws {}{}\n", n.name, n.op, n.variant, layout_name(n.layout),
                       n.isa.empty() ? "-" : n.isa, shape_str(n.output_shape), n.workspace_bytes,
                       fused.empty() ? "" : " fused " + fused);
  }
  const MemoryReport& m = s.memory();
  out += fmt::format("memory arena {} naive {} lower_bound {} workspace {} weights {} prepared {}\n",
                     m.arena_bytes, m.naive_bytes, m.lower_bound_bytes, m.workspace_bytes, m.weight_bytes,
                     m.prepared_bytes);
  for (const detail::PlannedTensor& t : detail::plan_of(s).tensors)
    out += fmt::format("tensor {} offset {} bytes {} steps {}..{} {}{}\n", t.name, t.offset, t.bytes, t.first,
                       t.last, layout_name(t.layout), t.workspace ? " workspace" : "");
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& y = outputs[k];
    double sum = 0;
    for (float v : y.data) sum += v;
    out += fmt::format("output {} {} {:016x} sum {:.9g}", k, shape_str(y.shape), hash_floats(y.data), sum);
    if (y.numel() <= kSavedFloats) {
      out += fmt::format(" saved {}", saved.size());
      saved.insert(saved.end(), y.data.begin(), y.data.end());
    }
    out += "\n";
  }
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Case {
  std::string name;              // file stem
  std::function<Model()> model;  // built once, when first needed
  std::function<std::vector<Tensor>(const Model&)> inputs;
  bool external = false;  // golden / byom: data made by a fixture
};

// A saved file: header lines ("model ...", "machine ...") and one section of lines per config.
struct Saved {
  std::vector<std::string> header;
  std::map<std::string, std::vector<std::string>> sections;
};

Saved parse(const std::string& text) {
  Saved saved;
  std::vector<std::string>* into = &saved.header;
  for (const std::string& line : lines(text)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.front() == '[' && line.back() == ']')
      into = &saved.sections[line.substr(1, line.size() - 2)];
    else
      into->push_back(line);
  }
  return saved;
}

// The first line of `got` and `want` that differs; on another machine, output lines only; without
// exact outputs, no output lines.
void compare(const std::vector<std::string>& got, const std::vector<std::string>& want, bool same_machine,
             bool exact_outputs, const std::string& where) {
  auto comparable = [&](const std::string& line) {
    const bool output = line.rfind("output ", 0) == 0;
    return output ? exact_outputs : same_machine;
  };
  std::vector<std::string> a, b;
  std::copy_if(got.begin(), got.end(), std::back_inserter(a), comparable);
  std::copy_if(want.begin(), want.end(), std::back_inserter(b), comparable);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "<none>", y = i < b.size() ? b[i] : "<none>";
    if (x == y) continue;
    CHECK_MESSAGE(x == y, where << ": the first line that differs");
    return;
  }
}

// Where a saved output differs from `out`: first element, largest difference, relative error.
void report_output(const std::vector<float>& saved, size_t offset, const Tensor& out, bool exact,
                   const std::string& where) {
  if (offset + out.data.size() > saved.size()) return;
  const std::vector<float> want(saved.begin() + static_cast<long>(offset),
                                saved.begin() + static_cast<long>(offset + out.data.size()));
  if (want == out.data) return;
  if (!exact) {
    CHECK_MESSAGE(test::rel_error(out.data, want) <= 1e-5, where << ": rel err " << test::rel_error(out.data, want));
    return;
  }
  double max_diff = 0;
  size_t first = want.size();
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != out.data[i]) {
      first = std::min(first, i);
      max_diff = std::max(max_diff, std::fabs(double(want[i]) - out.data[i]));
    }
  FAIL_CHECK(where << ": differs from the saved output from element " << first << " on, max |diff| "
                   << max_diff << ", rel err " << test::rel_error(out.data, want));
}

// One case on every config: writes its expected files (CASE.txt, CASE.npy), or compares against them.
void check_case(const Case& c) {
  CAPTURE(c.name);
  for (const auto& [name, value] : kPinned) {
    const char* v = std::getenv(name);
    REQUIRE_MESSAGE((v && std::string(v) == value),
                    name << " must be " << value << " (ctest and `make bit-identical-data` set it)");
  }
  const Model model = c.model();
  const std::vector<Tensor> inputs = c.inputs(model);
  const std::string stem = kData + "/" + c.name;
  const std::vector<std::string> header{fmt::format("model {:016x}", fingerprint(model, inputs)),
                                        fmt::format("machine processors {}", processors())};
  Saved want;
  std::vector<float> want_outputs;
  if (!write_mode()) {
    want = parse(read_text(stem + ".txt"));
    REQUIRE_MESSAGE(want.header.size() == 2,
                    "no expected data in " << stem << ".txt: run `make bit-identical-data`");
    if (c.external && want.header[0] != header[0]) {
      MESSAGE(c.name << ": the fixture made another model or input than the saved data's (" << header[0]
                     << ", saved " << want.header[0] << "; another torch version?): not checked");
      return;
    }
    CHECK_MESSAGE(want.header[0] == header[0], stem << ".txt: the model or its input changed");
    if (want.header[1] != header[1])
      MESSAGE(stem << ".txt: saved on another machine (" << want.header[1] << "): plan lines not compared");
    if (fs::exists(stem + ".npy")) want_outputs = read_npy(stem + ".npy").data;
  }

  std::string text = "# expected by tests/test_bit_identical.cc; regenerate with `make bit-identical-data`\n";
  for (const std::string& line : header) text += line + "\n";
  std::vector<float> saved;
  for (const Config& config : kConfigs) {
    CAPTURE(config.name);
    if (config.backend == "cpu" && cpu_isa_supported() < config.isa) {
      REQUIRE_MESSAGE(!write_mode(),
                      "regenerate on a CPU with " << cpu_isa_name(config.isa) << " (every level is saved)");
      MESSAGE("CPU ISA " << cpu_isa_name(config.isa) << " not on this CPU: " << c.name << " [" << config.name
                         << "] not checked");
      continue;
    }
    SessionOptions o;
    o.backend = config.backend;
    o.batch = inputs.at(0).shape.at(0);
    o.cpu_isa = config.isa;
    Session s(model, o);
    const std::vector<Tensor> outputs = s.run(inputs);
    const std::string section = describe(s, inputs, outputs, saved);
    text += "[" + config.name + "]\n" + section;
    if (write_mode()) continue;
    const auto it = want.sections.find(config.name);
    REQUIRE_MESSAGE(it != want.sections.end(), stem << ".txt has no [" << config.name << "]");
    const std::string where = stem + ".txt [" + config.name + "]";
    const bool exact = INFER_BIT_IDENTICAL_EXACT || config.backend != "cpu";
    // "plan-stale REASON" opens a section whose plan lines were saved before a change that could not
    // be regenerated at that level (no such CPU at hand) but leaves its outputs' bits alone (a fusion
    // whose kernel is bit-identical to the unfused pair): outputs compared, plan lines not, said here.
    std::vector<std::string> want_lines = it->second;
    bool plan_stale = false;
    if (!want_lines.empty() && want_lines.front().rfind("plan-stale ", 0) == 0) {
      MESSAGE(where << ": plan lines saved stale (" << want_lines.front().substr(11)
                    << "): outputs compared, the plan not; `make bit-identical-data` on a CPU with this level clears it");
      want_lines.erase(want_lines.begin());
      plan_stale = true;
    }
    compare(lines(section), want_lines, want.header[1] == header[1] && !plan_stale, exact, where);
    for (const std::string& line : it->second) {  // "output K SHAPE HASH sum S saved OFFSET"
      size_t k = 0, offset = 0;
      const size_t at = line.find(" saved ");
      if (line.rfind("output ", 0) != 0 || at == std::string::npos) continue;
      k = std::stoul(line.substr(7));
      offset = std::stoul(line.substr(at + 7));
      if (k < outputs.size())
        report_output(want_outputs, offset, outputs[k], exact, where + " output " + std::to_string(k));
    }
  }
  if (write_mode()) {
    std::ofstream(stem + ".txt", std::ios::binary) << text;
    if (!saved.empty()) write_npy(stem + ".npy", Tensor({static_cast<int64_t>(saved.size())}, saved));
  }
}

Tensor random_input(const Model& model, int64_t batch, uint64_t seed) {
  Shape shape = model.inputs().at(0).shape;
  shape[0] = batch;
  return Tensor(shape, test::random_vector(static_cast<size_t>(shape_numel(shape)), seed));
}

Tensor head(const Tensor& t, int64_t rows) {
  Shape s = t.shape;
  const int64_t per = t.numel() / s[0];
  s[0] = rows;
  return Tensor(s, std::vector<float>(t.data.begin(), t.data.begin() + rows * per));
}

// x [N,8,12,12] -> conv 3x3 relu -> conv 3x3, + x, relu (fuse_conv_residual) -> squeeze-excite (global
// average pool, 1x1 conv relu, 1x1 conv sigmoid, x * gate: fuse_squeeze_excite) -> [tconv 4x4 s2 p1
// relu (24x24) -> avgpool 2 ; depthwise conv 3x3] -> concat -> maxpool 2 -> batchnorm -> relu ->
// flatten -> dense 10 -> softmax.
Model blocks_model() {
  ModelBuilder b("blocks");
  uint64_t seed = 900;
  auto weights = [&](const std::string& name, Shape shape, float scale) {
    std::vector<float> w =
        test::random_vector(static_cast<size_t>(shape_numel(shape)), ++seed, -scale, scale);
    return b.constant(name, shape, w);
  };
  const int x = b.input("x", {-1, 8, 12, 12});
  Conv2DParams c3;
  c3.pad = {1, 1, 1, 1};
  Conv2DParams c3_relu = c3;
  c3_relu.activation.kind = ActivationKind::Relu;
  int h =
      b.node("conv1", c3_relu, {x, weights("conv1.w", {8, 8, 3, 3}, 0.3f), weights("conv1.b", {8}, 0.1f)});
  h = b.node("conv2", c3, {h, weights("conv2.w", {8, 8, 3, 3}, 0.3f), weights("conv2.b", {8}, 0.1f)});
  AddParams add;
  add.activation.kind = ActivationKind::Relu;
  const int r = b.node("residual", add, {h, x});
  Pool2DParams gap;
  gap.kind = PoolKind::Average;
  gap.kernel_h = gap.kernel_w = gap.stride_h = gap.stride_w = 12;
  int s = b.node("se_pool", gap, {r});
  Conv2DParams c1;
  c1.activation.kind = ActivationKind::Relu;
  s = b.node("se_fc1", c1, {s, weights("se1.w", {2, 8, 1, 1}, 0.5f), weights("se1.b", {2}, 0.1f)});
  c1.activation.kind = ActivationKind::Sigmoid;
  s = b.node("se_fc2", c1, {s, weights("se2.w", {8, 2, 1, 1}, 0.5f), weights("se2.b", {8}, 0.1f)});
  BinaryParams mul;
  mul.kind = BinaryKind::Mul;
  const int se = b.node("se_mul", mul, {r, s});
  ConvTranspose2DParams t;
  t.stride_h = t.stride_w = 2;
  t.pad = {1, 1, 1, 1};
  t.activation.kind = ActivationKind::Relu;
  int up = b.node("tconv", t, {se, weights("tconv.w", {8, 4, 4, 4}, 0.3f), weights("tconv.b", {4}, 0.1f)});
  Pool2DParams avg;
  avg.kind = PoolKind::Average;
  up = b.node("down", avg, {up});
  Conv2DParams dw = c3;
  dw.groups = 8;
  const int d = b.node("depthwise", dw, {se, weights("dw.w", {8, 1, 3, 3}, 0.5f)});
  int y = b.node("concat", ConcatParams{1}, {up, d});
  y = b.node("pool", Pool2DParams{}, {y});
  y = b.node("bn", BatchNormParams{},
             {y, weights("bn.scale", {12}, 1.f), weights("bn.bias", {12}, 0.2f),
              weights("bn.mean", {12}, 0.2f), b.constant("bn.var", {12}, std::vector<float>(12, 1.5f))});
  y = b.node("relu", ActivationParams{}, {y});
  y = b.node("flatten", FlattenParams{1}, {y});
  y = b.node("fc", DenseParams{}, {y, weights("fc.w", {10, 12 * 6 * 6}, 0.1f), weights("fc.b", {10}, 0.1f)});
  b.output(b.node("softmax", SoftmaxParams{1}, {y}));
  return Model::from_bytes(b.finish(), "blocks");
}

std::vector<Case> own_cases() {
  std::vector<Case> cases;
  struct Zoo {
    const char* name;
    int image_size;
    int64_t batch;
  };
  uint64_t seed = 100;
  for (const Zoo& z : {Zoo{"lenet5", 28, 2}, Zoo{"alexnet", 63, 2}, Zoo{"vgg11", 32, 2}, Zoo{"vgg16", 32, 1},
                       Zoo{"dcgan", 0, 2}, Zoo{"ebgan", 0, 1}}) {
    const uint64_t input_seed = ++seed;
    cases.push_back({std::string("zoo-") + z.name,
                     [z] {
                       zoo::ZooOptions o;
                       o.image_size = z.image_size;
                       return Model::from_bytes(zoo::build(z.name, o).finish(), z.name);
                     },
                     [z, input_seed](const Model& m) {
                       return std::vector<Tensor>{random_input(m, z.batch, input_seed)};
                     }});
  }
  const std::string models = std::string(INFER_SOURCE_DIR) + "/models/";
  cases.push_back({"shipped-lenet5_fashion", [models] { return Model::load(models + "lenet5_fashion.fb"); },
                   [models](const Model&) {
                     return std::vector<Tensor>{head(read_npy(models + "testdata/lenet5/inputs.npy"), 4)};
                   }});
  cases.push_back({"shipped-ebgan_fashion", [models] { return Model::load(models + "ebgan_fashion.fb"); },
                   [models](const Model&) {
                     return std::vector<Tensor>{head(read_npy(models + "testdata/ebgan/z.npy"), 2)};
                   }});
  cases.push_back({"builder-blocks", blocks_model,
                   [](const Model& m) { return std::vector<Tensor>{random_input(m, 3, 950)}; }});
  return cases;
}

// The cases of a fixture's manifest.json ("cases" of make_golden.py, "models" of make_byom.py): each
// ONNX file imported by the library entry point, at batch 1 (the input's first sample).
std::vector<Case> fixture_cases(const std::string& dir, const std::string& prefix) {
  std::ifstream f(dir + "/manifest.json");
  if (!f) return {};
  const nlohmann::json m = nlohmann::json::parse(f);
  std::vector<Case> cases;
  auto add = [&](const std::string& name, const std::string& onnx, const std::string& input) {
    cases.push_back(
        {prefix + name,
         [=] { return Model::from_bytes(onnx_import::import_file(dir + "/" + onnx).finish(), onnx); },
         [=](const Model&) { return std::vector<Tensor>{head(read_npy(dir + "/" + input), 1)}; }, true});
  };
  if (m.contains("cases")) {
    for (const auto& c : m["cases"]) {
      // The zoo architectures are cases of their own above (the golden EB-GAN alone would take a
      // minute on the reference backend); the rest are small nets.
      if (c.contains("zoo") || !c.contains("onnx") || !c.contains("input")) continue;
      add(c["name"].get<std::string>(), c["onnx"].get<std::string>(), c["input"].get<std::string>());
    }
  }
  if (m.contains("models")) {
    for (const auto& c : m["models"]) {
      if (!c.contains("exports") || c["exports"].empty()) continue;
      add(c["name"].get<std::string>(), c["exports"][0]["onnx"].get<std::string>(),
          c["input"].get<std::string>());
    }
  }
  return cases;
}

}  // namespace

TEST_CASE("bit-identical: zoo, shipped and builder models on reference and cpu at every ISA level") {
  if (write_mode()) {  // start afresh: no file of a case that is gone stays behind
    fs::remove_all(kData);
    fs::create_directories(kData);
  }
  for (const Case& c : own_cases()) check_case(c);
}

TEST_CASE("bit-identical: ONNX golden nets and real architectures (when their fixtures ran)") {
  for (const auto& [dir, prefix] : {std::pair<std::string, std::string>{GOLDEN_DIR, "golden-"},
                                    std::pair<std::string, std::string>{BYOM_DIR, "byom-"}}) {
    const std::vector<Case> cases = fixture_cases(dir, prefix);
    if (cases.empty()) {
      if (write_mode())
        FAIL("no fixture data in " << dir << ": run the golden_data and byom_data ctest fixtures first");
      MESSAGE("no fixture data in " << dir << ": " << prefix << "* cases not checked");
      continue;
    }
    for (const Case& c : cases) check_case(c);
  }
}
