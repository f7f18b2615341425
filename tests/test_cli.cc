// Tests of the `infer` command-line tool, run as a separate process (INFER_BIN) the way users run it:
// generator -> PNG grid, classifier -> top-5, outputs as .npy equal to an in-process Session run,
// profiling outputs, and every kind of bad input -> exit 2 with exactly one "error: " line on stderr
// (usage errors -> exit 1), never a crash and never an overwritten model or half-written output.
#include <doctest/doctest.h>
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "image_io.h"
#include "infer/infer.h"
#include "npy.h"
#include "test_util.h"

namespace fs = std::filesystem;
using infer::Shape;
using infer::Tensor;

namespace {

using infer::test::quote;
using infer::test::Result;
using infer::test::run_shell;
using infer::test::slurp;
using infer::test::tmp;

// `shell_prefix` runs in the same /bin/sh first (e.g. a ulimit), then the program is exec'd.
Result run_exe(const std::string& exe, const std::string& args, const std::string& shell_prefix = "") {
  return run_shell(shell_prefix + (shell_prefix.empty() ? "" : "exec ") + quote(exe) + " " + args);
}
Result infer_cli(const std::string& args) { return run_exe(INFER_BIN, args); }

// The error contract: exit 2 and exactly one stderr line starting "error: ".
void check_one_error(const Result& r, const std::string& expect_in_message = "") {
  CAPTURE(r.err);
  CHECK(r.code == 2);
  const auto lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("error: ", 0) == 0);
  if (!expect_in_message.empty()) CHECK(lines[0].find(expect_in_message) != std::string::npos);
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}
std::vector<uint8_t> read_bytes(const std::string& path) {
  const std::string s = slurp(path);
  return {s.begin(), s.end()};
}

std::vector<float> seeded(size_t n, uint64_t seed, float scale = 0.5f) {
  return infer::test::random_vector(n, seed, -scale, scale);
}

// A tiny generator: z [N,8,1,1] -> 4x4 transposed conv to 3 channels -> tanh: [N,3,4,4].
const std::string& generator_model() {
  static const std::string path = [] {
    infer::ModelBuilder b("tiny_generator");
    b.set_metadata("task", "generator");
    b.set_metadata("output.range", "-1,1");
    b.set_metadata("latent.dim", "8");
    int z = b.input("z", {-1, 8, 1, 1});
    int w = b.constant("w", {8, 3, 4, 4}, seeded(8 * 3 * 16, 11));
    int bias = b.constant("b", {3}, seeded(3, 12));
    infer::ConvTranspose2DParams p;
    p.activation.kind = infer::ActivationKind::Tanh;
    b.output(b.node("tconv", p, {z, w, bias}));
    const std::string file = tmp("generator.fb");
    b.save(file);
    return file;
  }();
  return path;
}

// A tiny classifier: gray 6x6 image -> flatten -> dense 36 -> 7 classes (logits, no softmax).
const std::vector<std::string> kLabels = {"cat", "dog", "bird", "fish", "frog", "horse", "ship"};
const std::string& classifier_model() {
  static const std::string path = [] {
    infer::ModelBuilder b("tiny_classifier");
    std::string labels;
    for (const auto& l : kLabels) labels += l + "\n";
    b.set_metadata("task", "classifier");
    b.set_metadata("labels", labels);
    b.set_metadata("input.mean", "0.5");
    b.set_metadata("input.std", "0.25");
    b.set_metadata("input.size", "6,6");
    int x = b.input("x", {-1, 1, 6, 6});
    int f = b.node("flatten", infer::FlattenParams{}, {x});
    int w = b.constant("w", {7, 36}, seeded(7 * 36, 21, 2.f));
    int bias = b.constant("b", {7}, seeded(7, 22));
    b.output(b.node("fc", infer::DenseParams{}, {f, w, bias}));
    const std::string file = tmp("classifier.fb");
    b.save(file);
    return file;
  }();
  return path;
}

// No task, two outputs: x [N,2,5,5] -> conv 3x3 -> out 0; relu of it -> out 1.
const std::string& two_output_model() {
  static const std::string path = [] {
    infer::ModelBuilder b("two_outputs");
    int x = b.input("x", {-1, 2, 5, 5});
    int w = b.constant("w", {4, 2, 3, 3}, seeded(4 * 2 * 9, 31));
    int conv = b.node("conv", infer::Conv2DParams{}, {x, w});
    int relu = b.node("relu", infer::ActivationParams{}, {conv});
    b.output(conv);
    b.output(relu);
    const std::string file = tmp("two_outputs.fb");
    b.save(file);
    return file;
  }();
  return path;
}

std::vector<Tensor> run_in_process(const std::string& model_path, const std::vector<Tensor>& inputs,
                                   int64_t batch) {
  infer::SessionOptions options;
  options.batch = batch;
  infer::Session session(infer::Model::load(model_path), options);
  return session.run(inputs);
}

std::vector<uint8_t> png_of(int w, int h, int c, const std::vector<uint8_t>& pixels) {
  std::vector<uint8_t> out;
  auto append = [](void* ctx, void* data, int size) {
    auto* v = static_cast<std::vector<uint8_t>*>(ctx);
    v->insert(v->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  };
  REQUIRE(stbi_write_png_to_func(append, &out, w, h, c, pixels.data(), w * c) != 0);
  return out;
}

// Sets the root table's field 0 (Model.format_version) of a FlatBuffers file, found through its vtable.
void set_format_version(std::vector<uint8_t>& file, uint32_t version) {
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, &file[at], 4);
    return v;
  };
  const size_t table = u32(0);
  int32_t to_vtable;
  std::memcpy(&to_vtable, &file[table], 4);
  const size_t vtable = size_t(int64_t(table) - to_vtable);
  uint16_t vtable_size, field0;
  std::memcpy(&vtable_size, &file[vtable], 2);
  REQUIRE(vtable_size > 4);
  std::memcpy(&field0, &file[vtable + 4], 2);
  REQUIRE(field0 != 0);
  REQUIRE(u32(table + field0) == infer::kFormatVersion);
  std::memcpy(&file[table + field0], &version, 4);
}

bool no_temporaries_left() {
  for (const auto& e : fs::directory_iterator(infer::test::scratch_dir()))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return false;
  return true;
}

}  // namespace

TEST_CASE("infer --version prints the engine version") {
  Result r = infer_cli("--version");
  CHECK(r.code == 0);
  CHECK(r.out == std::string("infer ") + infer::version() + "\n");
  CHECK(r.err.empty());
}

TEST_CASE("generator: a PNG grid from a seeded latent, reproducible, pixels mapped from the output") {
  const std::string& model = generator_model();
  const std::string png = tmp("gen.png"), npy = tmp("gen.npy"), png2 = tmp("gen2.png"),
                    png3 = tmp("gen3.png");
  Result r = infer_cli("--model " + quote(model) + " --batch 5 --seed 3 --out " + quote(png));
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("N(0,1)") != std::string::npos);

  // 5 images of 3x4x4: 3 columns, 2 rows, 2-pixel borders.
  int w = 0, h = 0, c = 0;
  const std::vector<uint8_t> file = read_bytes(png);
  stbi_uc* pixels = stbi_load_from_memory(file.data(), int(file.size()), &w, &h, &c, 0);
  REQUIRE(pixels != nullptr);
  CHECK(w == 3 * 6 + 2);
  CHECK(h == 2 * 6 + 2);
  CHECK(c == 3);

  // The same seed as .npy gives the raw values the PNG was mapped from ([-1,1] -> 0..255).
  REQUIRE(infer_cli("--model " + quote(model) + " --batch 5 --seed 3 --out " + quote(npy)).code == 0);
  Tensor raw = infer::read_npy(npy);
  REQUIRE(raw.shape == Shape{5, 3, 4, 4});
  for (int i = 0; i < 5; ++i)
    for (int ch = 0; ch < 3; ++ch)
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x) {
          const float v = raw.data[((i * 3 + ch) * 4 + y) * 4 + x];
          CHECK(std::abs(v) <= 1.f);
          const int px = 2 + (i % 3) * 6 + x, py = 2 + (i / 3) * 6 + y;
          CHECK(int(pixels[(py * w + px) * 3 + ch]) == int(std::lround((v + 1.f) / 2.f * 255.f)));
        }
  stbi_image_free(pixels);

  // Reproducible: the same seed writes the same bytes; another seed does not.
  REQUIRE(infer_cli("--model " + quote(model) + " --batch 5 --seed 3 --out " + quote(png2)).code == 0);
  REQUIRE(infer_cli("--model " + quote(model) + " --batch 5 --seed 4 --out " + quote(png3)).code == 0);
  CHECK(read_bytes(png2) == file);
  CHECK(read_bytes(png3) != file);

  // The latent is N(0,1): a batch of 4096 x 8 values has mean ~0 and variance ~1.
  const std::string big = tmp("z_probe.npy");
  infer::ModelBuilder b("identity_latent");
  b.set_metadata("task", "generator");
  int z = b.input("z", {-1, 8, 1, 1});
  b.output(b.node("flatten", infer::FlattenParams{}, {z}));
  b.save(tmp("identity.fb"));
  REQUIRE(
      infer_cli("--model " + quote(tmp("identity.fb")) + " --batch 4096 --seed 9 --out " + quote(big))
          .code == 0);
  Tensor zs = infer::read_npy(big);
  REQUIRE(zs.data.size() == 4096u * 8);
  double mean = 0, var = 0;
  for (float v : zs.data) mean += v;
  mean /= double(zs.data.size());
  for (float v : zs.data) var += (v - mean) * (v - mean);
  var /= double(zs.data.size());
  CHECK(std::abs(mean) < 0.03);
  CHECK(std::abs(var - 1.0) < 0.05);
  CHECK(no_temporaries_left());
}

TEST_CASE("generator without --out is an error asking for it") {
  Result r = infer_cli("--model " + quote(generator_model()));
  check_one_error(r, "--out");
}

TEST_CASE("classifier: an image of another size and channel count is converted; top-5 per row") {
  // A 13x9 RGB image for a 6x6 gray input: converted to gray, resized, normalised per the metadata.
  std::vector<uint8_t> rgb(13 * 9 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = uint8_t((i * 37) % 256);
  const std::string image = tmp("photo.png");
  write_bytes(image, png_of(13, 9, 3, rgb));

  Result r =
      infer_cli("--model " + quote(classifier_model()) + " --input " + quote(image) + " --batch 2");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());

  // The same computation in process gives the expected ranking.
  Tensor x = infer::load_image(image, 1, 6, 6, {{0.5f}, {0.25f}});
  Tensor batch({2, 1, 6, 6});
  std::copy(x.data.begin(), x.data.end(), batch.data.begin());
  std::copy(x.data.begin(), x.data.end(), batch.data.begin() + 36);
  Tensor logits = run_in_process(classifier_model(), {batch}, 2)[0];
  std::vector<double> prob(7);
  double sum = 0;
  for (int k = 0; k < 7; ++k) sum += prob[k] = std::exp(double(logits.data[k]));
  for (double& p : prob) p /= sum;
  std::vector<int> order = {0, 1, 2, 3, 4, 5, 6};
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return prob[a] > prob[b] || (prob[a] == prob[b] && a < b); });

  std::istringstream lines(r.out);
  std::vector<std::string> all;
  for (std::string line; std::getline(lines, line);) all.push_back(line);
  for (int row = 0; row < 2; ++row) {
    auto header = std::find(all.begin(), all.end(), "row " + std::to_string(row) + ": top-5");
    REQUIRE(header != all.end());
    double previous = 2;
    for (int rank = 0; rank < 5; ++rank) {
      const std::string& line = *(header + 1 + rank);
      CAPTURE(line);
      const int k = order[size_t(rank)];
      CHECK(line.rfind("  " + std::to_string(rank + 1) + ". " + kLabels[size_t(k)] + " (" +
                           std::to_string(k) + ")",
                       0) == 0);
      const double p = std::stod(line.substr(line.find_last_of(' ') + 1));
      CHECK(std::abs(p - prob[size_t(k)]) <= 6e-5);  // printed with 4 decimals
      CHECK(p <= previous);
      previous = p;
    }
  }
}

TEST_CASE("outputs as .npy equal an in-process run; several outputs get _<index> names") {
  // Per-sample .npy shape at batch 1, written to out_0.npy / out_1.npy.
  Tensor x({2, 5, 5}, seeded(50, 41, 1.f));
  const std::string in = tmp("x.npy"), out = tmp("out.npy");
  infer::write_npy(in, x);
  Result r = infer_cli("--model " + quote(two_output_model()) + " --input " + quote(in) + " --out " +
                       quote(out));
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  Tensor batched({1, 2, 5, 5}, x.data);
  std::vector<Tensor> expect = run_in_process(two_output_model(), {batched}, 1);
  Tensor o0 = infer::read_npy(tmp("out_0.npy")), o1 = infer::read_npy(tmp("out_1.npy"));
  CHECK(o0.shape == Shape{1, 4, 3, 3});
  CHECK(o1.shape == Shape{1, 4, 3, 3});
  CHECK(infer::test::rel_error(o0.data, expect[0].data) <= 1e-6);
  CHECK(infer::test::rel_error(o1.data, expect[1].data) <= 1e-6);
  for (float v : o1.data) CHECK(v >= 0.f);
  CHECK(!fs::exists(out));

  // The full [batch, ...] shape at batch 3.
  Tensor x3({3, 2, 5, 5}, seeded(150, 42, 1.f));
  infer::write_npy(in, x3);
  r = infer_cli("--model " + quote(two_output_model()) + " --batch 3 --input " + quote(in) + " --out " +
                quote(out));
  REQUIRE(r.code == 0);
  expect = run_in_process(two_output_model(), {x3}, 3);
  CHECK(infer::test::rel_error(infer::read_npy(tmp("out_0.npy")).data, expect[0].data) <= 1e-6);

  // A classifier's logits with --out, from a per-sample .npy.
  Tensor img({1, 6, 6}, seeded(36, 43, 1.f));
  infer::write_npy(in, img);
  r = infer_cli("--model " + quote(classifier_model()) + " --input " + quote(in) + " --out " +
                quote(out));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("row 0: top-5") != std::string::npos);
  Tensor logits = infer::read_npy(out);
  CHECK(logits.shape == Shape{1, 7});
  CHECK(infer::test::rel_error(
            logits.data,
            run_in_process(classifier_model(), {Tensor({1, 1, 6, 6}, img.data)}, 1)[0].data) <= 1e-6);

  // Without --out and without a task: shapes and first values on stdout.
  r = infer_cli("--model " + quote(two_output_model()) + " --seed 2");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("uniform [-1,1)") != std::string::npos);
  CHECK(r.out.find("1x4x3x3") != std::string::npos);
  CHECK(no_temporaries_left());
}

TEST_CASE("the batch follows a .npy input: any batch the model allows, or one line saying why not") {
  // A free batch (-1): a batch-3 file needs no --batch; the outputs equal a session made at batch 3.
  Tensor x3({3, 2, 5, 5}, seeded(150, 44, 1.f));
  const std::string in = tmp("batch3.npy"), out = tmp("batch3_out.npy");
  infer::write_npy(in, x3);
  Result r = infer_cli("--model " + quote(two_output_model()) + " --input " + quote(in) + " --out " + quote(out));
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("input 'x' 3x2x5x5: from") != std::string::npos);
  const std::vector<Tensor> expect = run_in_process(two_output_model(), {x3}, 3);
  CHECK(infer::read_npy(tmp("batch3_out_0.npy")).data == expect[0].data);
  CHECK(infer::read_npy(tmp("batch3_out_1.npy")).data == expect[1].data);
  // --batch is for random and image inputs: another one with a .npy is one error line.
  check_one_error(infer_cli("--model " + quote(two_output_model()) + " --batch 2 --input " + quote(in)),
                  "--batch 2 but input '" + in + "' holds a batch of 3");

  // A model built at a fixed batch of 2 (no -1) runs a batch-3 file; rows are independent.
  infer::ModelBuilder b("fixed2");
  b.output(b.node("soft", infer::SoftmaxParams{1}, {b.input("x", {2, 5})}));
  const std::string fixed = tmp("fixed2.fb");
  b.save(fixed);
  Tensor z({3, 5}, seeded(15, 45, 1.f));
  infer::write_npy(in, z);
  r = infer_cli("--model " + quote(fixed) + " --input " + quote(in) + " --out " + quote(out));
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const Tensor y = infer::read_npy(out);
  CHECK(y.shape == Shape{3, 5});
  double row_sum = 0;
  for (int i = 0; i < 5; ++i) row_sum += y.data[size_t(10 + i)];
  CHECK(row_sum == doctest::Approx(1.0));

  // One whose producer fixed the batch (batch.fixed) says why, in one line.
  b.set_metadata("batch.fixed", "node 'v' (Reshape): shape [2,-1] starts with 2");
  b.save(fixed);
  check_one_error(infer_cli("--model " + quote(fixed) + " --input " + quote(in)),
                  "batch 3 cannot apply: the model has no batch dimension (input 'x' is 2x5, with no leading -1); "
                  "it runs only at the size it was built with (batch.fixed: node 'v' (Reshape)");
}

TEST_CASE("profiling: --profile table, --profile-json is JSON, --trace has traceEvents, -v logs") {
  const std::string json = tmp("profile.json"), trace = tmp("trace.json");
  Result r = infer_cli("--model " + quote(classifier_model()) + " --runs 3 --profile --profile-json " +
                       quote(json) + " --trace " + quote(trace));
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("fc") != std::string::npos);                 // the table names the nodes
  nlohmann::json profile = nlohmann::json::parse(slurp(json));  // throws (fails) if not JSON
  CHECK(profile.is_object());
  nlohmann::json chrome = nlohmann::json::parse(slurp(trace));
  REQUIRE(chrome.contains("traceEvents"));
  CHECK(chrome["traceEvents"].is_array());
  CHECK(!chrome["traceEvents"].empty());

  r = infer_cli("--model " + quote(classifier_model()) + " -v");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("[debug]") != std::string::npos);
  CHECK(r.err.find("fc") != std::string::npos);  // the kernel chosen per node

  // A forced variant that does not exist is the engine's error: exit 2, one line.
  check_one_error(infer_cli("--model " + quote(classifier_model()) + " --kernel dense=no_such_variant"));
}

TEST_CASE("bad model files: exit 2 with exactly one error line, never a crash") {
  const std::vector<uint8_t> good = read_bytes(classifier_model());
  REQUIRE(good.size() > 64);

  std::vector<std::pair<std::string, std::vector<uint8_t>>> files;
  files.push_back({"empty.fb", {}});
  files.push_back(
      {"truncated.fb", std::vector<uint8_t>(good.begin(), good.begin() + long(good.size() / 2))});
  files.push_back({"header_only.fb", std::vector<uint8_t>(good.begin(), good.begin() + 8)});
  std::mt19937_64 rng(5);
  std::vector<uint8_t> noise(2048);
  for (auto& b : noise) b = uint8_t(rng());
  files.push_back({"random.fb", noise});
  std::vector<uint8_t> wrong_id = good;
  std::memcpy(&wrong_id[4], "XXXX", 4);
  files.push_back({"wrong_identifier.fb", wrong_id});
  std::vector<uint8_t> future = good;
  set_format_version(future, infer::kFormatVersion + 1);
  files.push_back({"future_version.fb", future});

  for (const auto& [name, bytes] : files) {
    CAPTURE(name);
    const std::string path = tmp(name);
    write_bytes(path, bytes);
    check_one_error(infer_cli("--model " + quote(path)), name);  // the message names the file
  }
  check_one_error(infer_cli("--model " + quote(tmp("does_not_exist.fb"))), "does_not_exist.fb");
  check_one_error(infer_cli("--model " + quote(infer::test::scratch_dir().string())));  // a directory
}

TEST_CASE("bad inputs: a non-image, a wrong-shape or broken .npy, a wrong input count") {
  const std::string text = tmp("notes.png");
  write_bytes(text, {'h', 'e', 'l', 'l', 'o'});
  check_one_error(infer_cli("--model " + quote(classifier_model()) + " --input " + quote(text)),
                  "notes.png");

  const std::string wrong = tmp("wrong.npy");
  infer::write_npy(wrong, Tensor({1, 5, 5}));
  check_one_error(infer_cli("--model " + quote(classifier_model()) + " --input " + quote(wrong)),
                  "1x5x5");
  // The per-sample shape is only accepted at batch 1.
  infer::write_npy(wrong, Tensor({1, 6, 6}));
  check_one_error(
      infer_cli("--model " + quote(classifier_model()) + " --batch 2 --input " + quote(wrong)));

  std::vector<uint8_t> broken = infer::encode_npy(Tensor({1, 1, 6, 6}));
  broken.resize(broken.size() - 3);
  write_bytes(wrong, broken);
  check_one_error(infer_cli("--model " + quote(classifier_model()) + " --input " + quote(wrong)),
                  "truncated");

  // An image for a model whose input is not an image.
  const std::string image = tmp("small.png");
  write_bytes(image, png_of(2, 2, 1, {1, 2, 3, 4}));
  infer::ModelBuilder b("dense_only");
  int x = b.input("x", {-1, 4});
  b.output(b.node("fc", infer::DenseParams{}, {x, b.constant("w", {2, 4}, seeded(8, 51))}));
  b.save(tmp("dense.fb"));
  check_one_error(infer_cli("--model " + quote(tmp("dense.fb")) + " --input " + quote(image)), "4-D");

  check_one_error(infer_cli("--model " + quote(classifier_model()) + " --input " + quote(image) +
                            " --input " + quote(image)),
                  "input");
  check_one_error(
      infer_cli("--model " + quote(classifier_model()) + " --input " + quote(tmp("nope.npy"))),
      "nope.npy");
}

TEST_CASE("unwritable outputs: exit 2, one line, nothing half-written") {
  check_one_error(infer_cli("--model " + quote(generator_model()) + " --out /nonexistent-dir/x.png"),
                  "/nonexistent-dir/x.png");
  check_one_error(
      infer_cli("--model " + quote(classifier_model()) + " --profile-json /nonexistent-dir/p.json"),
      "/nonexistent-dir/p.json");
  check_one_error(
      infer_cli("--model " + quote(classifier_model()) + " --trace /nonexistent-dir/t.json"));
  check_one_error(
      infer_cli("--model " + quote(classifier_model()) + " --out " + quote(infer::test::scratch_dir().string())),
      "directory");
  CHECK(no_temporaries_left());
}

TEST_CASE("usage errors exit 1") {
  const std::string m = quote(classifier_model());
  const std::vector<std::string> cases = {"",
                                          "--out x.npy",
                                          "--model " + m + " --batch 0",
                                          "--model " + m + " --batch -3",
                                          "--model " + m + " --batch many",
                                          "--model " + m + " --no-such-flag",
                                          "--model " + m + " --kernel dense",
                                          "--model " + m + " --kernel =reference",
                                          "--model " + m + " --kernel dense=",
                                          "--model " + m + " --kernel dense=a --kernel dense=b",
                                          "--model " + m + " --backend tpu",
                                          "--model " + m + " --runs 0",
                                          "--model"};
  for (const std::string& args : cases) {
    CAPTURE(args);
    Result r = infer_cli(args);
    CHECK(r.code == 1);
    CHECK(!r.err.empty());
  }
  Result help = infer_cli("--help");
  CHECK(help.code == 0);
  CHECK(help.out.find("--model") != std::string::npos);
}

// --precision int8 (issue 30 must 2): the shipped EB-GAN quantized in memory exactly as `infer quantize
// --calib random --samples 128 --seed 2` writes it (the run's --seed 1 + 1), so the outputs are the
// quantized file's bit for bit; its transposed convolutions run in int8; a quantized model runs as it is.
TEST_CASE("--precision int8: the model quantized in memory, as infer quantize's file runs") {
  const std::string model = std::string(INFER_SOURCE_DIR) + "/models/ebgan_fashion.fb";
  const std::string a = tmp("int8_run.npy"), b = tmp("int8_file.npy"), f = tmp("f32_run.npy"), q = tmp("int8.fb");
  const Result run = infer_cli("--model " + quote(model) + " --precision int8 --backend cpu --batch 3 -v --out " + quote(a));
  CAPTURE(run.err);
  REQUIRE(run.code == 0);
  CHECK(run.out.find("calibration: 128 random samples (latent z ~ N(0,1), seed 2)") != std::string::npos);
  CHECK(run.out.find("quantized in memory (as infer quantize --calib random --samples 128), float parts in fp32") !=
        std::string::npos);
  CHECK(run.err.find("quantized_conv2d") != std::string::npos);  // -v lists the int8 nodes
  REQUIRE(infer_cli("quantize " + quote(model) + " --calib random --samples 128 --seed 2 --report-samples 0 --out " +
                    quote(q)).code == 0);
  REQUIRE(infer_cli("--model " + quote(q) + " --backend cpu --batch 3 --out " + quote(b)).code == 0);
  REQUIRE(infer_cli("--model " + quote(model) + " --backend cpu --batch 3 --out " + quote(f)).code == 0);
  const Tensor ta = infer::read_npy(a), tb = infer::read_npy(b), tf = infer::read_npy(f);
  REQUIRE(ta.shape == Shape{3, 1, 64, 64});
  CHECK(ta.data == tb.data);
  const double err = infer::test::rel_error(ta.data, tf.data);
  CHECK(err > 0.0);
  CHECK(err < 0.05);
  // a quantized file runs as it is; --calib needs int8 (in eval too)
  const Result again = infer_cli("--model " + quote(q) + " --precision int8 --backend cpu --batch 3 --out " + quote(a));
  CHECK(again.code == 0);
  CHECK(again.out.find("quantized already; it runs as it is") != std::string::npos);
  CHECK(infer::read_npy(a).data == tb.data);
  const Result calib = infer_cli("--model " + quote(model) + " --calib random --out " + quote(a));
  CHECK(calib.code == 1);
  CHECK(calib.err.find("--calib and --calib-samples need --precision int8") != std::string::npos);
  CHECK(infer_cli("--model " + quote(model) + " --precision int8 --calib-samples 0 --out " + quote(a)).code == 1);
  const Result bad = infer_cli("--model " + quote(model) + " --precision int8 --calib /no/such/file.npy --out " + quote(a));
  CHECK(bad.code == 2);
  CHECK(bad.err.find("/no/such/file.npy") != std::string::npos);
  const Result eval_calib = infer_cli("eval --model " + quote(model) + " --images x --labels y --calib random");
  CHECK(eval_calib.code == 1);
  CHECK(eval_calib.err.find("--calib and --calib-samples need --precision int8") != std::string::npos);
}

TEST_CASE("outputs never overwrite the model or an input") {
  const std::string model = tmp("precious.fb");
  fs::copy_file(classifier_model(), model, fs::copy_options::overwrite_existing);
  const std::vector<uint8_t> before = read_bytes(model);
  check_one_error(infer_cli("--model " + quote(model) + " --out " + quote(model)), "--model");
  // The same file under another spelling.
  const std::string other = (infer::test::scratch_dir() / "." / "precious.fb").string();
  check_one_error(infer_cli("--model " + quote(model) + " --profile-json " + quote(other)));
  check_one_error(infer_cli("--model " + quote(model) + " --trace " + quote(model)));
  // ... and through a symbolic link.
  const std::string link = tmp("link.fb");
  fs::create_symlink(model, link);
  check_one_error(infer_cli("--model " + quote(model) + " --out " + quote(link)));
  CHECK(read_bytes(model) == before);
  CHECK(fs::is_symlink(link));

  const std::string in = tmp("keep.npy");
  infer::write_npy(in, Tensor({1, 6, 6}, seeded(36, 61)));
  const std::vector<uint8_t> in_before = read_bytes(in);
  check_one_error(infer_cli("--model " + quote(model) + " --input " + quote(in) + " --out " + quote(in)),
                  "--input");
  CHECK(read_bytes(in) == in_before);
  check_one_error(infer_cli("--model " + quote(model) + " --out " + quote(tmp("a.json")) + " --trace " +
                            quote(tmp("a.json"))));
}

TEST_CASE("a zoo model from model-zoo runs through the CLI") {
  const std::string lenet = tmp("lenet5.fb");
  Result zoo = run_exe(MODEL_ZOO_BIN, "lenet5 --out " + quote(lenet) + " --seed 1");
  CAPTURE(zoo.err);
  REQUIRE(zoo.code == 0);
  Result r = infer_cli("--model " + quote(lenet) + " --batch 3 --seed 1");
  CAPTURE(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("row 2: top-5") != std::string::npos);
}

// ---- help text, --max-memory, files never half-written (issue 17) ----------------------------------

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every option line of a CLI11 help text: "  <option and type>  <description>" on one line, the type
// a word a user can read (FILE, N, NAME, SIZE, ...), never CLI11's internals.
void check_help(const std::string& help, const std::vector<std::string>& options) {
  for (const char* bad : {"ENUM", "->", " OR ", "value in", "TEXT:", "INT:", "{"}) {
    CAPTURE(bad);
    CHECK(help.find(bad) == std::string::npos);
  }
  for (const std::string& option : options) {
    CAPTURE(option);
    bool found = false;
    for (const std::string& line : lines_of(help)) {
      if (line.rfind("  " + option + " ", 0) != 0) continue;
      found = true;
      // The description follows on the same line, after at least two spaces.
      const size_t gap = line.find("  ", 2 + option.size());
      REQUIRE(gap != std::string::npos);
      CHECK(line.find_first_not_of(' ', gap) != std::string::npos);
    }
    CHECK(found);
  }
}

}  // namespace

TEST_CASE("--help: every option with a readable type and a one-line description") {
  Result r = infer_cli("--help");
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  check_help(r.out, {"--model FILE", "--out FILE", "--input FILE ...", "--batch N", "--seed N",
                     "--backend NAME", "--precision NAME", "--calib DATA", "--calib-samples N", "--autotune", "--plan-cache FILE", "--max-memory SIZE", "--runs N",
                     "--profile", "--profile-json FILE", "--trace FILE", "--kernel OP[:NODE]=VAR ...",
                     "--no-fuse", "--pass NAME=on|off ...", "-v,--verbose"});
  // The line the issue reported as "--precision ENUM:value in {fp16->,fp32-> ,tf32->} OR {, ,}".
  CHECK(r.out.find("  --precision NAME            fp32 (default, strict), tf32 or fp16 (half storage, "
                   "fp32 accumulation); tf32 and fp16 need cuda; int8: quantize the model in memory first as "
                   "infer quantize does (see --calib), the rest in fp16 on cuda, fp32 on cpu\n") != std::string::npos);

  r = infer_cli("eval --help");
  REQUIRE(r.code == 0);
  check_help(r.out, {"--model FILE", "--images FILE", "--labels FILE", "--batch N", "--backend NAME",
                     "--precision NAME", "--calib DATA", "--calib-samples N", "--max-memory SIZE", "--predictions FILE"});

  r = run_exe(MODEL_ZOO_BIN, "--help");
  REQUIRE(r.code == 0);
  check_help(r.out, {"name NAME", "-o,--out FILE", "--weights DIR", "--meta KEY=VALUE ..."});

  // Bad values are usage errors (exit 1) that say what is allowed.
  r = infer_cli("--model x.fb --precision fp64");
  CHECK(r.code == 1);
  CHECK(r.err.find("--precision: must be fp32, tf32, fp16 or int8, not 'fp64'") != std::string::npos);
  r = infer_cli("eval --model x.fb --images x --labels y --precision int4");
  CHECK(r.code == 1);
  CHECK(r.err.find("--precision: must be fp32, tf32, fp16 or int8, not 'int4'") != std::string::npos);
  r = infer_cli("--model x.fb --max-memory -5");
  CHECK(r.code == 1);
  CHECK(r.err.find("--max-memory: must be a size in bytes such as 2GiB, not '-5'") != std::string::npos);
}

namespace {

// Two outputs of very different sizes: the 64x64 average of x ([N,1,1,1], a 132-byte .npy) first, then
// relu(x) ([N,1,64,64], 16 KiB of float32 per row).
const std::string& small_and_large_model() {
  static const std::string path = [] {
    infer::ModelBuilder b("small_and_large");
    const int x = b.input("x", {-1, 1, 64, 64});
    infer::Pool2DParams avg;
    avg.kind = infer::PoolKind::Average;
    avg.kernel_h = avg.kernel_w = avg.stride_h = avg.stride_w = 64;
    b.output(b.node("mean", avg, {x}));
    b.output(b.node("relu", infer::ActivationParams{}, {x}));
    const std::string file = tmp("small_and_large.fb");
    b.save(file);
    return file;
  }();
  return path;
}

// /bin/sh (dash) counts `ulimit -f` in 512-byte blocks: 16 = 8 KiB. With SIGXFSZ ignored (an ignored
// signal stays ignored across exec) a write past the limit fails with EFBIG, as on a full disk.
const std::string kFileSizeLimit8K = "trap '' XFSZ; ulimit -f 16; ";

}  // namespace

TEST_CASE("a write that fails (file-size limit, as a full disk) replaces no existing output") {
  // Works as root too, where a read-only folder would not stop the writes (see the next test).
  const std::string& model = small_and_large_model();
  const std::string out = tmp("staged.npy"), json = tmp("staged.json");
  const std::string args = "--model " + quote(model) + " --batch 2 --out " + quote(out) +
                           " --profile-json " + quote(json) + " --runs 1";
  REQUIRE(infer_cli(args + " --seed 1").code == 0);
  const std::string out0 = tmp("staged_0.npy"), out1 = tmp("staged_1.npy");
  const std::vector<uint8_t> before0 = read_bytes(out0), before1 = read_bytes(out1),
                             before_json = read_bytes(json);
  REQUIRE(before0.size() < 8192);   // the profile JSON and output 0 fit under the limit ...
  REQUIRE(before_json.size() < 8192);
  REQUIRE(before1.size() > 8192);   // ... output 1 does not

  Result r = run_exe(INFER_BIN, args + " --seed 2", kFileSizeLimit8K);
  check_one_error(r, "cannot write '" + out1 + "': File too large");
  CHECK(r.out.find("wrote") == std::string::npos);
  // Output 0 and the JSON were written to temporaries before output 1 failed, and never renamed.
  CHECK(read_bytes(out0) == before0);
  CHECK(read_bytes(out1) == before1);
  CHECK(read_bytes(json) == before_json);
  CHECK(no_temporaries_left());

  // The same command without the limit replaces them (so the checks above can fail).
  REQUIRE(infer_cli(args + " --seed 2").code == 0);
  CHECK(read_bytes(out0) != before0);
  CHECK(read_bytes(out1) != before1);

  // model-zoo's .fb (and onnx2fb's, through the same write_file_atomic): the old file stays.
  const std::string zoo = tmp("zoo_keep.fb");
  REQUIRE(run_exe(MODEL_ZOO_BIN, "lenet5 --seed 1 --out " + quote(zoo)).code == 0);
  const std::vector<uint8_t> zoo_before = read_bytes(zoo);
  REQUIRE(zoo_before.size() > 8192);
  r = run_exe(MODEL_ZOO_BIN, "lenet5 --seed 2 --out " + quote(zoo), kFileSizeLimit8K);
  check_one_error(r, "File too large");
  CHECK(read_bytes(zoo) == zoo_before);
  CHECK(no_temporaries_left());
}

TEST_CASE("a read-only folder: exit 2 naming the file, the old output stays") {
  if (::geteuid() == 0) {
    // Root writes through permission bits; the file-size-limit test above proves the same property.
    MESSAGE("skipped: running as root, where a read-only folder does not stop writes");
    return;
  }
  const fs::path dir = infer::test::scratch_dir() / "read_only";
  fs::create_directories(dir);
  const std::string out = (dir / "out.npy").string();
  const std::string args = "--model " + quote(classifier_model()) + " --out " + quote(out);
  REQUIRE(infer_cli(args + " --seed 1").code == 0);
  const std::vector<uint8_t> before = read_bytes(out);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  Result r = infer_cli(args + " --seed 2");
  fs::permissions(dir, fs::perms::owner_all);
  check_one_error(r, "cannot write '" + out + "': Permission denied");
  CHECK(read_bytes(out) == before);
}

TEST_CASE("--max-memory: a session over the limit is refused naming the bytes; a larger limit runs") {
  const std::string& model = small_and_large_model();  // ~33 KiB of arena and inputs/outputs
  check_one_error(infer_cli("--model " + quote(model) + " --max-memory 1KiB"),
                  "but the memory limit is 1024 bytes (max_memory / --max-memory)");
  check_one_error(infer_cli("--model " + quote(model) + " --max-memory 1k --out " + quote(tmp("never.npy"))),
                  "the memory limit is 1000 bytes");
  CHECK(!fs::exists(tmp("never_0.npy")));
  Result r = infer_cli("--model " + quote(model) + " --max-memory 64MiB");
  CAPTURE(r.err);
  CHECK(r.code == 0);
}

