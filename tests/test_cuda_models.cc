// Whole models on the CUDA backend through the public Session API: every zoo model (classifiers at
// small image sizes, as tests/test_models.cc) in fp32 at batch 1 and 3 against the "reference"
// backend, batch-3 rows against batch-1 runs, tf32 and fp16 sessions within 1e-2 of the fp32
// reference, the classifiers in strict fp32 at batch 8 on cuDNN (Winograd / FFT allowed), bit-identical
// repeated runs (CUDA-graph replay is deterministic), the cuda profile and
// benchmark, autotuned sessions, the shipped trained models against the cpu backend and PyTorch's
// exported outputs, and the errors (fp16 on cpu, an arena larger than the GPU). Skipped (one line on
// stdout) when there is no CUDA device.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "infer/infer.h"
#include "infer/kernel.h"
#include "npy.h"
#include "test_util.h"
#include "zoo.h"

using namespace infer;
using infer::test::random_vector;
using infer::test::rel_error;

namespace {

const std::string kModels = std::string(INFER_SOURCE_DIR) + "/models/";
const std::string kTestdata = kModels + "testdata/";

// fp32 tolerances against the double-accumulating reference. 1e-5 (docs/design.md) for LeNet-5 and the
// generators; the deep classifiers get 1e-4: their float32 GEMMs (cuBLAS, K up to 25088) sum in a
// different order than the reference, the rounding compounds over 8-16 layers, and the random-weight
// logits partly cancel, so 1e-5 is not reachable there (the cpu backend's zoo test allows the same).
struct ZooModel {
  const char* name;
  int image_size;  // 0: the architecture's own (generators)
  double fp32_tol;
};
const ZooModel kZoo[] = {{"lenet5", 28, 1e-5}, {"alexnet", 63, 1e-4}, {"vgg11", 32, 1e-4},
                         {"vgg16", 32, 1e-4},  {"dcgan", 0, 1e-5},    {"ebgan", 0, 1e-5}};
constexpr double kLowPrecisionTol = 1e-2;  // tf32 and fp16 sessions vs the fp32 reference
// cuda fp32 vs the cpu backend: two float32 implementations, each within 1e-5 of the reference.
constexpr double kCpuTol = 2e-5;

Model build(const std::string& name, int image_size) {
  zoo::ZooOptions zo;
  zo.image_size = image_size;
  return Model::from_bytes(zoo::build(name, zo).finish(), name);
}

Session make_session(const Model& model, const std::string& backend, int64_t batch,
                     Precision precision = Precision::FP32, bool autotune = false) {
  SessionOptions o;
  o.backend = backend;
  o.batch = batch;
  o.precision = precision;
  o.autotune = autotune;
  return Session(model, o);
}

Shape with_batch(Shape s, int64_t batch) {
  s[0] = batch;
  return s;
}

int64_t per_sample(const Shape& shape) { return shape_numel(Shape(shape.begin() + 1, shape.end())); }

std::vector<float> row(const std::vector<float>& data, int64_t r, int64_t per_row) {
  return std::vector<float>(data.begin() + r * per_row, data.begin() + (r + 1) * per_row);
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every node of a cuda session runs a registered cuda variant.
void check_cuda_nodes(const Session& s) {
  CHECK(s.backend() == "cuda");
  for (const NodeInfo& n : s.nodes()) {
    CAPTURE(n.name);
    CHECK_MESSAGE(KernelRegistry::global().find("cuda", n.op, n.variant) != nullptr,
                  n.op << "." << n.variant << " is not a cuda variant");
  }
}

Tensor single_output(std::vector<Tensor> out) {
  REQUIRE(out.size() == 1);
  return std::move(out[0]);
}

void check_zoo_model(const ZooModel& zm, uint64_t seed) {
  const std::string name = zm.name;
  CAPTURE(name);
  const Model model = build(name, zm.image_size);
  REQUIRE(model.inputs().size() == 1);
  REQUIRE(model.outputs().size() == 1);
  const int64_t batch = 3;
  const Shape in3 = with_batch(model.inputs()[0].shape, batch);
  const Shape in1 = with_batch(model.inputs()[0].shape, 1);
  const int64_t in_per_row = per_sample(in3);
  const int64_t out_per_row = per_sample(model.outputs()[0].shape);
  const std::vector<float> x = random_vector(static_cast<size_t>(shape_numel(in3)), seed);

  // the oracle: the reference backend at batch 3 (its rows equal its batch-1 runs; tests/test_models.cc)
  Session ref = make_session(model, "reference", batch);
  const Tensor want = single_output(ref.run({Tensor(in3, x)}));

  // fp32 at batch 3: matches the reference; a second run is bit-identical
  Session s3 = make_session(model, "cuda", batch);
  check_cuda_nodes(s3);
  CHECK(s3.precision() == Precision::FP32);
  CHECK(s3.batch() == batch);
  const Tensor got3 = single_output(s3.run({Tensor(in3, x)}));
  CHECK(got3.shape == want.shape);
  CHECK(test::all_finite(got3.data));
  const double err3 = rel_error(got3.data, want.data);
  MESSAGE(name << " cuda fp32 batch 3: relative error " << err3);
  CHECK(err3 <= zm.fp32_tol);
  CHECK_MESSAGE(bit_identical(single_output(s3.run({Tensor(in3, x)})).data, got3.data),
                "a second fp32 run differs");

  // fp32 at batch 1, row by row: each equals its batch-3 row. Not bit for bit: cuBLAS picks its GEMM
  // algorithm (tiling, split-K) per problem size, so batch 1 and 3 may sum in different orders;
  // the same session is bit-identical run to run (checked above).
  Session s1 = make_session(model, "cuda", 1);
  check_cuda_nodes(s1);
  for (int64_t r = 0; r < batch; ++r) {
    CAPTURE(r);
    const Tensor got1 = single_output(s1.run({Tensor(in1, row(x, r, in_per_row))}));
    CHECK(got1.shape == with_batch(want.shape, 1));
    CHECK(rel_error(got1.data, row(got3.data, r, out_per_row)) <= zm.fp32_tol);
    CHECK(rel_error(got1.data, row(want.data, r, out_per_row)) <= zm.fp32_tol);
  }

  // tf32 and fp16 at batch 3: within 1e-2 of the fp32 reference, runs bit-identical
  for (Precision p : {Precision::TF32, Precision::FP16}) {
    const std::string precision = precision_name(p);
    CAPTURE(precision);
    Session sp = make_session(model, "cuda", batch, p);
    check_cuda_nodes(sp);
    CHECK(sp.precision() == p);
    const Tensor gotp = single_output(sp.run({Tensor(in3, x)}));
    CHECK(gotp.shape == want.shape);
    const double errp = rel_error(gotp.data, want.data);
    MESSAGE(name << " cuda " << precision << " batch 3: relative error " << errp);
    CHECK(errp <= kLowPrecisionTol);
    CHECK_MESSAGE(bit_identical(single_output(sp.run({Tensor(in3, x)})).data, gotp.data),
                  "a second " << precision << " run differs");
  }
}

}  // namespace

CUDA_TEST_CASE("lenet5 on cuda") { check_zoo_model(kZoo[0], 201); }
CUDA_TEST_CASE("alexnet on cuda (63x63)") { check_zoo_model(kZoo[1], 202); }
CUDA_TEST_CASE("vgg11 on cuda (32x32)") { check_zoo_model(kZoo[2], 203); }
CUDA_TEST_CASE("vgg16 on cuda (32x32)") { check_zoo_model(kZoo[3], 204); }
CUDA_TEST_CASE("dcgan on cuda") { check_zoo_model(kZoo[4], 205); }
CUDA_TEST_CASE("ebgan on cuda") { check_zoo_model(kZoo[5], 206); }

// Strict fp32 from batch 8 runs the 3x3 / 5x5 / 11x11 convolutions on cuDNN, whose Find may pick
// Winograd or FFT: still within the fp32 tolerance of the reference, and replays bit-identical.
CUDA_TEST_CASE("strict fp32 at batch 8: classifiers on cuDNN (Winograd / FFT allowed) match the reference") {
  for (const ZooModel& zm : {kZoo[1], kZoo[2], kZoo[3]}) {
    const std::string name = zm.name;
    CAPTURE(name);
    const Model model = build(name, zm.image_size);
    const Shape in = with_batch(model.inputs()[0].shape, 8);
    const Tensor x(in, random_vector(static_cast<size_t>(shape_numel(in)), 207));
    Session ref = make_session(model, "reference", 8);
    const Tensor want = single_output(ref.run({x}));
    Session s = make_session(model, "cuda", 8);
    check_cuda_nodes(s);
    int convs = 0, on_cudnn = 0;
    for (const NodeInfo& n : s.nodes()) {
      if (n.op != "conv2d") continue;
      ++convs;
      on_cudnn += n.variant == "cudnn";
    }
    CHECK(convs > 0);
    CHECK(on_cudnn == convs);
    const Tensor got = single_output(s.run({x}));
    const double err = rel_error(got.data, want.data);
    MESSAGE(name << " cuda fp32 batch 8 (cudnn): relative error " << err);
    CHECK(err <= zm.fp32_tol);
    CHECK(bit_identical(single_output(s.run({x})).data, got.data));
  }
}

CUDA_TEST_CASE("backend auto picks cuda when a GPU is present; the session names its device") {
  const Model model = build("lenet5", 28);
  Session s(model, SessionOptions{});
  CHECK(s.backend() == "cuda");
  CHECK(s.precision() == Precision::FP32);
  CHECK(!s.device().empty());
  CHECK(s.device() == cuda::device_description());
}

CUDA_TEST_CASE("profile on cuda: every node timed with its variant; device memory reported") {
  for (const char* name : {"lenet5", "dcgan"}) {
    CAPTURE(name);
    const Model model = build(name, std::string(name) == "lenet5" ? 28 : 0);
    Session s = make_session(model, "cuda", 2);
    const Shape in = with_batch(model.inputs()[0].shape, 2);
    const Tensor x(in, random_vector(static_cast<size_t>(shape_numel(in)), 5));
    const Profile prof = s.profile({x}, 5);
    CHECK(prof.backend == "cuda");
    CHECK(prof.batch == 2);
    CHECK(prof.total_ms > 0);
    REQUIRE(prof.nodes.size() == s.nodes().size());
    bool any_prepares = false;  // a chosen variant re-lays weights out (flipped, per-phase, fused filter)
    for (const NodeProfile& n : prof.nodes) {
      CAPTURE(n.name);
      CHECK(!n.variant.empty());
      const KernelVariant* v = KernelRegistry::global().find("cuda", n.op, n.variant);
      REQUIRE(v != nullptr);
      if (v->prepare) any_prepares = true;
      CHECK(n.time_ms > 0);
    }
    const MemoryReport& m = prof.memory;
    CHECK(m.device_total_bytes > 0);
    CHECK(m.device_peak_bytes > 0);
    CHECK(m.device_peak_bytes <= m.device_total_bytes);
    // in use at the peak: at least this session's arena and weights
    CHECK(m.device_peak_bytes >= m.arena_bytes + m.weight_bytes);
    // weights as held in fp32: the model's float32 constants, less what BN folding removed
    CHECK(m.weight_bytes > 0);
    CHECK(m.weight_bytes <= model.weight_bytes());
    CHECK(m.weight_bytes >= model.weight_bytes() / 2);
    // re-laid-out weights (flipped / per-phase / fused filters) are at most about one more copy
    CHECK(m.prepared_bytes <= 2 * m.weight_bytes + (uint64_t(1) << 20));
    // none of the chosen variants prepares: nothing counted (DCGAN at batch 2 runs gemm_col2im
    // everywhere, which uses the weight as stored). A prepare may allocate nothing (cudnn in NCHW
    // keeps only descriptors), so the converse does not hold.
    if (!any_prepares) CHECK(m.prepared_bytes == 0);

    // fp16 holds every constant as half
    Session h = make_session(model, "cuda", 2, Precision::FP16);
    CHECK(h.memory().weight_bytes * 2 == s.memory().weight_bytes);
  }
}

CUDA_TEST_CASE("benchmark on cuda: device time per forward") {
  const Model model = build("dcgan", 0);
  Session s = make_session(model, "cuda", 4);
  const Shape in = with_batch(model.inputs()[0].shape, 4);
  const Tensor x(in, random_vector(static_cast<size_t>(shape_numel(in)), 6));
  const std::vector<double> ms = s.benchmark({x}, 5, 2);
  REQUIRE(ms.size() == 5);
  for (double t : ms) CHECK(t > 0);
  // the session still runs correctly after benchmarking
  Session ref = make_session(model, "reference", 4);
  CHECK(rel_error(single_output(s.run({x})).data, single_output(ref.run({x})).data) <= 1e-5);
}

CUDA_TEST_CASE("autotuned sessions still match the reference") {
  for (const ZooModel& zm : {kZoo[0], kZoo[1], kZoo[4]}) {  // lenet5, alexnet, dcgan
    const std::string name = zm.name;
    CAPTURE(name);
    const Model model = build(name, zm.image_size);
    const Shape in = with_batch(model.inputs()[0].shape, 2);
    const Tensor x(in, random_vector(static_cast<size_t>(shape_numel(in)), 7));
    Session ref = make_session(model, "reference", 2);
    const Tensor want = single_output(ref.run({x}));
    for (Precision p : test::kAllPrecisions) {
      const std::string precision = precision_name(p);
      CAPTURE(precision);
      Session tuned = make_session(model, "cuda", 2, p, /*autotune=*/true);
      check_cuda_nodes(tuned);
      const Tensor got = single_output(tuned.run({x}));
      const double err = rel_error(got.data, want.data);
      MESSAGE(name << " autotuned " << precision << ": relative error " << err);
      CHECK(err <= (p == Precision::FP32 ? zm.fp32_tol : kLowPrecisionTol));
      CHECK(bit_identical(single_output(tuned.run({x})).data, got.data));
    }
  }
}

namespace {

// Two ResNet basic blocks (3x3 conv + BatchNorm-free bias, residual add, ReLU) and a projection
// shortcut: 32 channels (cuDNN's NHWC path at batch >= 4 in fp16 / tf32), 12x12 maps.
Model resnet_blocks() {
  ModelBuilder b("resblocks");
  uint64_t seed = 40;
  auto conv = [&](const std::string& name, int x, int64_t cin, int64_t cout, int k, bool bias,
                  ActivationKind act) {
    Conv2DParams p;
    p.pad = {k / 2, k / 2, k / 2, k / 2};
    p.activation.kind = act;
    const float scale = 1.f / std::sqrt(float(cin * k * k));
    std::vector<int> in = {x, b.constant(name + ".w", {cout, cin, k, k},
                                         random_vector(size_t(cout * cin * k * k), ++seed, -scale, scale))};
    if (bias) in.push_back(b.constant(name + ".b", {cout}, random_vector(size_t(cout), ++seed, -0.1f, 0.1f)));
    return b.node(name, p, in);
  };
  auto relu = [&](const std::string& name, int x) {
    ActivationParams p;
    p.activation.kind = ActivationKind::Relu;
    return b.node(name, p, {x});
  };
  int x = b.input("x", {-1, 16, 12, 12});
  x = conv("stem", x, 16, 32, 3, true, ActivationKind::Relu);
  for (int i = 0; i < 2; ++i) {
    const std::string n = "block" + std::to_string(i);
    int y = conv(n + ".conv1", x, 32, 32, 3, true, ActivationKind::Relu);
    y = conv(n + ".conv2", y, 32, 32, 3, i == 0, ActivationKind::None);  // block1's has no bias
    const int sc = i == 0 ? conv(n + ".proj", x, 32, 32, 1, false, ActivationKind::None) : x;
    x = relu(n + ".relu", b.node(n + ".add", AddParams{}, {y, sc}));
  }
  b.output(x);
  return Model::from_bytes(b.finish(), "resblocks.fb");
}

}  // namespace

// fuse_conv_residual on cuda: the residual adds go into the convolutions' epilogues (the GEMM
// variants' bias_activation in NCHW, cuDNN's z input in NHWC) with the same values as unfused.
CUDA_TEST_CASE("fuse_conv_residual on cuda: residual adds fused in NCHW and NHWC, values unchanged") {
  const Model model = resnet_blocks();
  for (int64_t batch : {1, 8}) {
    const Shape in = with_batch(model.inputs()[0].shape, batch);
    const Tensor x(in, random_vector(static_cast<size_t>(shape_numel(in)), 11));
    Session ref = make_session(model, "reference", batch);
    const Tensor want = single_output(ref.run({x}));
    for (Precision p : test::kAllPrecisions) {
      const std::string precision = precision_name(p);
      CAPTURE(batch);
      CAPTURE(precision);
      Session s = make_session(model, "cuda", batch, p);
      check_cuda_nodes(s);
      CHECK(s.passes()[5] == "fuse_conv_residual: 2 conv2d + residual add pairs fused");
      int fused = 0, nhwc = 0;
      for (const NodeInfo& n : s.nodes()) {
        if (n.op != "conv2d" || n.fused.empty() || n.fused[0].find(".add") == std::string::npos) continue;
        ++fused;
        nhwc += n.layout == Layout::NHWC;
        CHECK(n.fused == std::vector<std::string>{n.name.substr(0, 6) + ".add", n.name.substr(0, 6) + ".relu"});
        CHECK((n.variant == "im2col_gemm" || n.variant == "gemm_1x1" || n.variant == "cudnn"));
      }
      CHECK(fused == 2);
      // fp16 / tf32 at batch 8 run the blocks channels-last on cuDNN (z = the residual)
      if (p != Precision::FP32 && batch == 8) CHECK(nhwc == 2);
      const Tensor got = single_output(s.run({x}));
      const double err = rel_error(got.data, want.data);
      MESSAGE("resblocks batch " << batch << " " << precision << ": relative error " << err);
      CHECK(err <= (p == Precision::FP32 ? 1e-5 : kLowPrecisionTol));
      SessionOptions off;
      off.backend = "cuda";
      off.batch = batch;
      off.precision = p;
      off.passes.fuse_conv_residual = false;
      Session plain(model, off);
      CHECK(plain.passes()[5] == "fuse_conv_residual: off");
      const double vs_off = rel_error(got.data, single_output(plain.run({x})).data);
      CHECK(vs_off <= (p == Precision::FP32 ? 1e-6 : kLowPrecisionTol));
    }
  }
  // Forced (--kernel conv2d=direct): the one variant that runs takes the residual too.
  SessionOptions o;
  o.backend = "cuda";
  o.batch = 2;
  o.kernels["conv2d"] = "direct";
  Session d(model, o);
  CHECK(d.passes()[5] == "fuse_conv_residual: 2 conv2d + residual add pairs fused");
  const Shape in = with_batch(model.inputs()[0].shape, 2);
  const Tensor x(in, random_vector(static_cast<size_t>(shape_numel(in)), 12));
  Session ref = make_session(model, "reference", 2);
  CHECK(rel_error(single_output(d.run({x})).data, single_output(ref.run({x})).data) <= 1e-5);
}

CUDA_TEST_CASE("lenet5_fashion.fb on cuda matches the cpu backend and PyTorch's logits") {
  const Model model = Model::load(kModels + "lenet5_fashion.fb");
  const Tensor inputs = read_npy(kTestdata + "lenet5/inputs.npy");
  const Tensor logits = read_npy(kTestdata + "lenet5/logits.npy");
  REQUIRE(inputs.shape == Shape{8, 1, 28, 28});
  Session cpu = make_session(model, "cpu", 8);
  const Tensor want = single_output(cpu.run({inputs}));
  for (Precision p : test::kAllPrecisions) {
    const std::string precision = precision_name(p);
    CAPTURE(precision);
    Session s = make_session(model, "cuda", 8, p);
    const Tensor got = single_output(s.run({inputs}));
    REQUIRE(got.shape == logits.shape);
    CHECK(rel_error(got.data, want.data) <= (p == Precision::FP32 ? kCpuTol : kLowPrecisionTol));
    // as tests/test_shipped_models.cc: 1e-5 against PyTorch in fp32
    CHECK(rel_error(got.data, logits.data) <= (p == Precision::FP32 ? 1e-5 : kLowPrecisionTol));
    if (p == Precision::FP32)
      for (int r = 0; r < 8; ++r) {  // same predictions as the cpu backend
        int best = 0, best_cpu = 0;
        for (int c = 1; c < 10; ++c) {
          if (got.data[size_t(r * 10 + c)] > got.data[size_t(r * 10 + best)]) best = c;
          if (want.data[size_t(r * 10 + c)] > want.data[size_t(r * 10 + best_cpu)]) best_cpu = c;
        }
        CHECK(best == best_cpu);
      }
  }
}

CUDA_TEST_CASE("ebgan_fashion.fb on cuda matches the cpu backend and PyTorch's images") {
  const Model model = Model::load(kModels + "ebgan_fashion.fb");
  const Tensor z = read_npy(kTestdata + "ebgan/z.npy");
  const Tensor images = read_npy(kTestdata + "ebgan/images.npy");
  REQUIRE(z.shape == Shape{8, 100, 1, 1});
  Session cpu = make_session(model, "cpu", 8);
  const Tensor want = single_output(cpu.run({z}));
  for (Precision p : test::kAllPrecisions) {
    const std::string precision = precision_name(p);
    CAPTURE(precision);
    Session s = make_session(model, "cuda", 8, p);
    const Tensor got = single_output(s.run({z}));
    REQUIRE(got.shape == images.shape);
    CHECK(test::all_finite(got.data));
    // the file stores float16 weights, read as float32 by both backends
    CHECK(rel_error(got.data, want.data) <= (p == Precision::FP32 ? kCpuTol : kLowPrecisionTol));
    // PyTorch ran float32 with the unrounded weights: docs/design.md's fp16 bound (tests/test_shipped_models.cc)
    CHECK(rel_error(got.data, images.data) <= kLowPrecisionTol);
  }
}

CUDA_TEST_CASE("errors: reduced precision off cuda, an arena larger than the GPU") {
  const Model lenet = build("lenet5", 28);
  for (const char* backend : {"cpu", "reference"})
    for (Precision p : {Precision::FP16, Precision::TF32}) {
      CAPTURE(backend);
      CHECK_THROWS_AS(make_session(lenet, backend, 1, p), Error);
    }

  // DCGAN at batch 2^20: ~0.8 MB of activations per sample, an arena near 1 TB. The arena is the
  // first allocation that grows with the batch (input/output staging is bound after it, backend.h).
  const Model dcgan = build("dcgan", 0);
  CHECK_THROWS_WITH_AS(make_session(dcgan, "cuda", int64_t(1) << 20), doctest::Contains("bytes"), Error);
  // the device is still usable afterwards
  Session s = make_session(dcgan, "cuda", 1);
  const Shape in = with_batch(dcgan.inputs()[0].shape, 1);
  const Tensor x(in, random_vector(static_cast<size_t>(shape_numel(in)), 8));
  Session ref = make_session(dcgan, "reference", 1);
  CHECK(rel_error(single_output(s.run({x})).data, single_output(ref.run({x})).data) <= 1e-5);
}
