// `infer eval` run as a process (INFER_BIN) the way users run it: on the full Fashion-MNIST test set
// (Debian's dataset-fashion-mnist, installed by scripts/install-deps.sh) the shipped LeNet-5 predicts
// the same class as the training script (models/testdata/lenet5/predictions.bin) on >= 99.9% of the
// 10,000 images and so reaches its accuracy (89.37%) within 0.1 points; plain (uncompressed) IDX files
// and a partial last batch give the same predictions; bad IDX files and mismatched data exit 2 with
// one "error: " line. `infer quantize` on the same data: LeNet-5 in int8 within 0.5 points of float32
// (issue 30's bound), and its bad inputs.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace fs = std::filesystem;

namespace {

using infer::test::quote;
using infer::test::Result;
using infer::test::run_shell;
using infer::test::slurp;
using infer::test::tmp;

std::vector<uint8_t> read_bytes(const std::string& path) {
  const std::string s = slurp(path);
  return {s.begin(), s.end()};
}
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// One OpenMP thread: ctest runs suites side by side on CI's two cores, and spinning OpenMP workers
// on oversubscribed cores slow the cpu backend down by orders of magnitude.
Result infer_cli(const std::string& args) {
  return run_shell("OMP_NUM_THREADS=1 " + quote(INFER_BIN) + " " + args);
}

// Exit 2 and exactly one stderr line "error: ...", containing `expect` when given.
void check_one_error(const Result& r, const std::string& expect = "") {
  CAPTURE(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.rfind("error: ", 0) == 0);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  if (!expect.empty()) CHECK(r.err.find(expect) != std::string::npos);
}

const std::string kModel = std::string(INFER_SOURCE_DIR) + "/models/lenet5_fashion.fb";

// The data set's folder: the Debian package, else the repository's git-ignored copy.
std::string dataset_dir() {
  for (const std::string& dir :
       {std::string("/usr/share/datasets/fashion-mnist"), std::string(INFER_SOURCE_DIR) + "/.data/fashion-mnist"})
    if (fs::exists(dir + "/t10k-images-idx3-ubyte.gz") && fs::exists(dir + "/t10k-labels-idx1-ubyte.gz"))
      return dir;
  FAIL("Fashion-MNIST not found: install the Debian package dataset-fashion-mnist "
       "(scripts/install-deps.sh)");
  return "";
}
std::string test_images() { return dataset_dir() + "/t10k-images-idx3-ubyte.gz"; }
std::string test_labels() { return dataset_dir() + "/t10k-labels-idx1-ubyte.gz"; }

// The inflated IDX bytes of a .gz file (through gzip(1): the test does not link zlib).
std::vector<uint8_t> gunzip(const std::string& gz, const std::string& name) {
  const std::string out = tmp(name);
  REQUIRE(std::system(("gzip -dc " + quote(gz) + " > " + quote(out)).c_str()) == 0);
  return read_bytes(out);
}

void put_be32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + size_t(i)] = uint8_t(v >> (24 - 8 * i));
}

// The first `n` items of an inflated IDX file with `ndims` dimensions, as a new plain IDX file.
std::vector<uint8_t> first_items(const std::vector<uint8_t>& idx, int ndims, uint32_t n) {
  const size_t header = 4 + 4 * size_t(ndims);
  size_t item = 1;
  for (int d = 1; d < ndims; ++d)
    item *= (size_t(idx[4 + 4 * d]) << 24) | (size_t(idx[5 + 4 * d]) << 16) |
            (size_t(idx[6 + 4 * d]) << 8) | size_t(idx[7 + 4 * d]);
  std::vector<uint8_t> out(idx.begin(), idx.begin() + std::ptrdiff_t(header + item * n));
  put_be32(out, 4, n);
  return out;
}

int parse_correct(const std::string& out) {
  // "accuracy: 89.37% (8937/10000)"
  const size_t at = out.find("accuracy: ");
  REQUIRE(at != std::string::npos);
  const size_t open = out.find('(', at);
  REQUIRE(open != std::string::npos);
  return std::atoi(out.c_str() + open + 1);
}

}  // namespace

TEST_CASE("eval on the 10,000 test images matches the training script's predictions") {
  const std::vector<uint8_t> expected =
      read_bytes(std::string(INFER_SOURCE_DIR) + "/models/testdata/lenet5/predictions.bin");
  REQUIRE(expected.size() == 10000);
  const std::string predictions = tmp("predictions.bin");
  // 10,000 = 39 x 256 + 16: the last batch is partial.
  const Result r = infer_cli("eval --model " + quote(kModel) + " --images " + quote(test_images()) +
                             " --labels " + quote(test_labels()) +
                             " --batch 256 --backend cpu --predictions " + quote(predictions));
  CAPTURE(r.out);
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());  // stderr is not a terminal: no progress bar
  const std::vector<uint8_t> got = read_bytes(predictions);
  REQUIRE(got.size() == 10000);
  int same = 0;
  for (size_t i = 0; i < got.size(); ++i) same += got[i] == expected[i];
  MESSAGE("same predicted class as PyTorch on " << same << " of 10000 images");
  CHECK(same >= 9990);

  // The training script's accuracy is 89.37% (8937 correct); at most 10 predictions differ.
  const int correct = parse_correct(r.out);
  CHECK(correct >= 8937 - (10000 - same));
  CHECK(correct <= 8937 + (10000 - same));
  CHECK(r.out.find("Ankle boot") != std::string::npos);  // the confusion matrix names the classes
  CHECK(r.out.find("confusion matrix") != std::string::npos);
  CHECK(r.out.find("images/s") != std::string::npos);

  SUBCASE("plain IDX files, reference backend, a partial last batch: the same predictions") {
    const std::string images = tmp("plain-images"), labels = tmp("plain-labels");
    write_bytes(images, first_items(gunzip(test_images(), "all-images"), 3, 300));
    write_bytes(labels, first_items(gunzip(test_labels(), "all-labels"), 1, 300));
    const std::string small = tmp("predictions300.bin");
    const Result p = infer_cli("eval --model " + quote(kModel) + " --images " + quote(images) +
                               " --labels " + quote(labels) +
                               " --batch 128 --backend reference --predictions " + quote(small));
    CAPTURE(p.err);
    REQUIRE(p.code == 0);
    const std::vector<uint8_t> sub = read_bytes(small);
    REQUIRE(sub.size() == 300);
    CHECK(sub == std::vector<uint8_t>(got.begin(), got.begin() + 300));
  }
}

TEST_CASE("eval: bad IDX files and mismatched data exit 2 with one error line") {
  // Inflated once for all subcases (doctest reruns the test case body per subcase).
  static const std::vector<uint8_t> images = first_items(gunzip(test_images(), "e-images"), 3, 20);
  static const std::vector<uint8_t> labels = first_items(gunzip(test_labels(), "e-labels"), 1, 20);
  const std::string good_images = tmp("good-images"), good_labels = tmp("good-labels");
  write_bytes(good_images, images);
  write_bytes(good_labels, labels);
  auto eval = [&](const std::string& img, const std::string& lab, const std::string& model = kModel) {
    return infer_cli("eval --model " + quote(model) + " --images " + quote(img) + " --labels " +
                     quote(lab));
  };
  REQUIRE(eval(good_images, good_labels).code == 0);

  SUBCASE("bad magic") {
    std::vector<uint8_t> bad = images;
    bad[0] = 0x12;
    write_bytes(tmp("bad-magic"), bad);
    check_one_error(eval(tmp("bad-magic"), good_labels), "magic");
    bad = images;
    bad[2] = 0x0d;  // float data: not supported
    write_bytes(tmp("bad-type"), bad);
    check_one_error(eval(tmp("bad-type"), good_labels), "data type");
  }
  SUBCASE("truncated data, truncated header, trailing bytes") {
    write_bytes(tmp("truncated"), std::vector<uint8_t>(images.begin(), images.end() - 1));
    check_one_error(eval(tmp("truncated"), good_labels), "truncated");
    write_bytes(tmp("short-header"), std::vector<uint8_t>(images.begin(), images.begin() + 10));
    check_one_error(eval(tmp("short-header"), good_labels), "truncated");
    std::vector<uint8_t> longer = labels;
    longer.push_back(0);
    write_bytes(tmp("longer"), longer);
    check_one_error(eval(good_images, tmp("longer")), "bytes after");
  }
  SUBCASE("truncated and corrupt gzip") {
    const std::vector<uint8_t> gz = read_bytes(test_labels());
    write_bytes(tmp("half.gz"), std::vector<uint8_t>(gz.begin(), gz.begin() + std::ptrdiff_t(gz.size() / 2)));
    check_one_error(eval(good_images, tmp("half.gz")), "truncated gzip");
    std::vector<uint8_t> corrupt = gz;
    for (size_t i = 20; i < 60 && i < corrupt.size(); ++i) corrupt[i] ^= 0x5a;
    write_bytes(tmp("corrupt.gz"), corrupt);
    check_one_error(eval(good_images, tmp("corrupt.gz")));
  }
  SUBCASE("image and label counts differ") {
    write_bytes(tmp("labels19"), first_items(labels, 1, 19));
    check_one_error(eval(good_images, tmp("labels19")), "20 images");
  }
  SUBCASE("wrong dimensions, a label beyond the classes, a missing file") {
    check_one_error(eval(good_labels, good_labels), "dimensions");
    std::vector<uint8_t> bad = labels;
    bad.back() = 10;
    write_bytes(tmp("label10"), bad);
    check_one_error(eval(good_images, tmp("label10")), "label 10");
    check_one_error(eval(good_images, tmp("no-such-file")), "cannot read");
  }
  SUBCASE("a model that is not a classifier") {
    check_one_error(eval(good_images, good_labels,
                         std::string(INFER_SOURCE_DIR) + "/models/ebgan_fashion.fb"),
                    "not a classifier");
  }
  SUBCASE("usage errors exit 1; plain `infer` still needs --model") {
    CHECK(infer_cli("eval --images " + quote(good_images)).code == 1);
    const Result r = infer_cli("");
    CHECK(r.code == 1);
    CHECK(r.err.find("--model is required") != std::string::npos);
  }
}

// `infer quantize` (issue 30): LeNet-5 calibrated on 1,000 training images, int8 weights per channel and
// u8 activations per tensor, run fake-quantized (Q/DQ in float: the int8 arithmetic without int8
// kernels), stays within 0.5 points of float32's accuracy on the 10,000 test images, by min-max and by
// entropy calibration.
TEST_CASE("quantize: LeNet-5 in int8 keeps its accuracy within 0.5 points") {
  const std::string train = dataset_dir() + "/train-images-idx3-ubyte.gz";
  REQUIRE(fs::exists(train));
  const Result f = infer_cli("eval --model " + quote(kModel) + " --images " + quote(test_images()) + " --labels " +
                             quote(test_labels()) + " --backend cpu");
  REQUIRE(f.code == 0);
  const int fp32 = parse_correct(f.out);
  for (const std::string method : {"minmax", "entropy"}) {
    CAPTURE(method);
    const std::string out = tmp("lenet5_int8_" + method + ".fb"), report = tmp("report_" + method + ".json");
    const Result q = infer_cli("quantize " + quote(kModel) + " --calib " + quote(train) + " --samples 1000 --method " +
                               method + " --backend cpu --out " + quote(out) + " --report " + quote(report));
    CAPTURE(q.out);
    CAPTURE(q.err);
    REQUIRE(q.code == 0);
    CHECK(q.out.find("5 node(s) quantized") != std::string::npos);  // 2 conv2d, 3 dense
    CHECK(q.out.find("per-layer error over 256 sample(s)") != std::string::npos);
    const std::string json = slurp(report);
    CHECK(json.find("\"relative_error\"") != std::string::npos);
    CHECK(json.find("\"calibration_samples\": 1000") != std::string::npos);
    const Result e = infer_cli("eval --model " + quote(out) + " --images " + quote(test_images()) + " --labels " +
                               quote(test_labels()) + " --backend cpu");
    REQUIRE(e.code == 0);
    const int int8 = parse_correct(e.out);
    MESSAGE(method << ": float32 " << fp32 / 100.0 << "%, int8 " << int8 / 100.0 << "%");
    CHECK(std::abs(int8 - fp32) <= 50);  // 0.5 points of 10,000 images
    CHECK(int8 != 0);
    // A quantized model is not quantized twice.
    check_one_error(infer_cli("quantize " + quote(out) + " --calib " + quote(train) + " --out " + quote(tmp("x.fb"))),
                    "already quantized");
    if (method != std::string("minmax")) continue;
    // --precision int8 quantizes in memory the same way: the same file's accuracy, image for image.
    const Result r = infer_cli("eval --model " + quote(kModel) + " --images " + quote(test_images()) + " --labels " +
                               quote(test_labels()) + " --backend cpu --precision int8 --calib " + quote(train) +
                               " --calib-samples 1000");
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("calibration: 1000 images from") != std::string::npos);
    CHECK(r.out.find("quantized in memory (as infer quantize --calib") != std::string::npos);
    CHECK(parse_correct(r.out) == int8);
  }
}

TEST_CASE("quantize: bad calibration data and paths exit with one error line") {
  const std::string out = tmp("q.fb");
  check_one_error(infer_cli("quantize " + quote(kModel) + " --calib " + quote(tmp("missing.idx")) + " --out " + quote(out)),
                  "missing.idx");
  check_one_error(infer_cli("quantize " + quote(kModel) + " --calib random --out " + quote(kModel)),
                  "is the model itself");
  // A .npy of the wrong per-sample shape.
  const std::string npy = tmp("calib.npy");
  {
    std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 5, 5), }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    bytes.push_back(uint8_t(header.size() & 0xff));
    bytes.push_back(uint8_t(header.size() >> 8));
    bytes.insert(bytes.end(), header.begin(), header.end());
    bytes.resize(bytes.size() + 2 * 25 * 4, 0);
    write_bytes(npy, bytes);
  }
  check_one_error(infer_cli("quantize " + quote(kModel) + " --calib " + quote(npy) + " --out " + quote(out)),
                  "has shape 2x1x5x5");
  check_one_error(infer_cli("quantize " + quote(kModel) + " --calib " + quote(tmp("")) + " --out " + quote(out)),
                  "holds no .png");
  CHECK(!fs::exists(out));
  const Result usage = infer_cli("quantize " + quote(kModel) + " --out " + quote(out));
  CHECK(usage.code == 1);
  CHECK(usage.err.find("--calib") != std::string::npos);
  // Random calibration works for any model (a generator's latents).
  const Result r = infer_cli("quantize " + quote(kModel) + " --calib random --samples 64 --method percentile "
                             "--activation-type i8 --report-samples 0 --out " + quote(out));
  CAPTURE(r.err);
  CHECK(r.code == 0);
  CHECK(fs::exists(out));
  // --reduce-range (7-bit weights) is recorded in the model's metadata
  const std::string out7 = tmp("q7.fb");
  const Result r7 = infer_cli("quantize " + quote(kModel) + " --calib random --samples 16 --reduce-range "
                              "--report-samples 0 --out " + quote(out7));
  CAPTURE(r7.err);
  CHECK(r7.code == 0);
  CHECK(slurp(out7).find("7-bit: reduce_range") != std::string::npos);  // FlatBuffers strings are plain bytes
}
