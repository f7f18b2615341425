// kernels/cpu/activation_simd.h (issue 27 must 3): activate_row at the process's CPU ISA level (ctest runs
// this suite at avx512, avx2 and baseline: INFER_CPU_ISA) against the scalar activate() of im2col.h for
// every ActivationKind: special values (0, -0, denormals, the exp overflow / underflow thresholds,
// huge, +-inf, NaN) at every position of rows of 0 to 3 * 16 + 5 floats (whole vectors and every tail
// length), random values over several ranges and random bit patterns, in place and out of place, the
// output poisoned first (with NaN, then with a finite sentinel, so that a NaN result cannot hide an
// unwritten element) and the floats past the row left alone. Then the kernels that apply it (conv2d
// depthwise, packed_gemm, packed_implicit, winograd; activation; squeeze_excite) against the reference
// with each curved kind, on planes and rows of several vectors plus a tail and of less than one vector,
// and several OpenMP chunks of the activation op.
//
// Tolerance, in units in the last place (ulp; the distance between the floats' ordered bit patterns, so
// it also covers denormals and inf next to FLT_MAX; +0 and -0 are the same point but the sign of a zero
// result is checked separately): kUlp below per kind. The exp-based kinds are within 2-3 ulp of glibc
// (docs/kernels.md "CPU: vectorised activations" has the measured maxima over every 64th float), so
// the bound is 4 ulp, 4.8e-7 relative at most: under any kernel test's 1e-5 norm tolerance by far.
// The piecewise-linear kinds are exact but HardSigmoid (alpha * x + beta may fuse into an FMA: within
// an ulp of 1 + |beta| absolute, abs_bound).
// NaN in gives NaN out and the reference's NaNs (silu(-inf), hardswish(-inf)) are NaN here too.
// The case "activation_simd error sweep" (skipped unless --no-skip) prints the measured maxima.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "infer/kernel.h"
#include "infer/cpu_isa.h"
#include "kernels/cpu/activation_simd.h"
#include "kernels/reference/common.h"
#include "test_util.h"

namespace infer::cpu {
namespace {
INFER_PER_ISA(void, act_row, activate_row, (float* y, const float* x, int64_t n, const Activation& act),
              (y, x, n, act))
INFER_PER_ISA(void, act_inplace, activate_row, (float* y, int64_t n, const Activation& act), (y, n, act))
}  // namespace
}  // namespace infer::cpu

using namespace infer;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 7.77e33f;

// Every kind, with the parameters the models use (and a second Clip / HardSigmoid / LeakyRelu / Elu).
std::vector<Activation> all_activations() {
  return {{ActivationKind::None, 0.01f, 0.f},       {ActivationKind::Relu, 0.01f, 0.f},
          {ActivationKind::LeakyRelu, 0.01f, 0.f},  {ActivationKind::LeakyRelu, -1.5f, 0.f},
          {ActivationKind::Tanh, 0.01f, 0.f},       {ActivationKind::Sigmoid, 0.01f, 0.f},
          {ActivationKind::Clip, 0.f, 6.f},         {ActivationKind::Clip, -0.3f, 0.45f},
          {ActivationKind::HardSigmoid, 0.2f, 0.5f}, {ActivationKind::HardSigmoid, 1.f / 6.f, 0.5f},
          {ActivationKind::HardSwish, 0.01f, 0.f},  {ActivationKind::Silu, 0.01f, 0.f},
          {ActivationKind::Elu, 1.f, 0.f},          {ActivationKind::Elu, 0.7f, 0.f},
          {ActivationKind::Exp, 0.01f, 0.f},        {ActivationKind::Sqrt, 0.01f, 0.f},
          {ActivationKind::Neg, 0.01f, 0.f},        {ActivationKind::Abs, 0.01f, 0.f},
          {ActivationKind::Softplus, 0.01f, 0.f}};
}

const char* kind_name(ActivationKind k) {
  static const char* names[] = {"None", "Relu", "LeakyRelu", "Tanh", "Sigmoid", "Clip", "HardSigmoid", "HardSwish",
                                "Silu", "Elu", "Exp", "Sqrt", "Neg", "Abs", "Softplus"};
  return names[static_cast<int>(k)];
}

int64_t ulp_bound(ActivationKind k) {
  switch (k) {
    case ActivationKind::Tanh: case ActivationKind::Sigmoid: case ActivationKind::Silu:
    case ActivationKind::Elu: case ActivationKind::Exp: case ActivationKind::Softplus:
      return 4;
    default: return 0;
  }
}

// HardSigmoid's alpha * x + beta may be one FMA here and two roundings in activate() (compiled for
// baseline), which differ by up to half an ulp of alpha * x: near 0 (alpha * x close to -beta) that is
// many ulp of the result, but an output in [0, 1] has |alpha * x| <= 1 + |beta|, so the difference is
// within an ulp of 1 + |beta| absolute.
double abs_bound(const Activation& act) {
  return act.kind == ActivationKind::HardSigmoid ? 0x1p-23 * (1.0 + std::fabs(double(act.beta))) : 0.0;
}

// Floats on one integer line: +-0 at 0, each step one ulp, inf one past FLT_MAX.
int64_t ordered(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i >= 0 ? int64_t(i) : -int64_t(i & 0x7fffffff);
}
int64_t ulp_distance(float a, float b) {
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// An empty string when got matches want (the scalar reference) within `bound` ulp, else why not.
std::string mismatch(float x, float got, float want, int64_t bound, double abs_tol) {
  char buf[160];
  if (std::isnan(want) != std::isnan(got)) {
    std::snprintf(buf, sizeof buf, "x=%.9g: got %.9g, want %.9g (NaN)", x, got, want);
    return buf;
  }
  if (std::isnan(want)) return "";
  if (want == 0.f && (got != 0.f || std::signbit(got) != std::signbit(want))) {
    std::snprintf(buf, sizeof buf, "x=%.9g: got %.9g, want %.9g (signed zero)", x, got, want);
    return buf;
  }
  if (ulp_distance(got, want) > bound && !(std::fabs(double(got) - double(want)) <= abs_tol)) {
    std::snprintf(buf, sizeof buf, "x=%.9g: got %.9g, want %.9g (%lld ulp > %lld)", x, got, want,
                  static_cast<long long>(ulp_distance(got, want)), static_cast<long long>(bound));
    return buf;
  }
  return "";
}

std::vector<float> special_values() {
  const float dmin = std::numeric_limits<float>::denorm_min(), fmin = std::numeric_limits<float>::min();
  const float fmax = std::numeric_limits<float>::max();
  std::vector<float> v = {0.f, 1e-45f, dmin, 3 * dmin, 1e-40f, fmin, 1e-30f, 1e-20f, 1e-10f, 1e-7f, 3e-5f,
                          1e-3f, 0.1f, 0.3465f, 0.5f, 0.6249f, 0.625f, 0.6251f, 1.f, 2.f, 2.9999f, 3.f, 3.0001f,
                          5.f, 6.f, 8.f, 9.f, 10.f, 15.f, 16.6f, 17.f, 20.f, 30.f, 44.3f, 50.f, 80.f, 87.f,
                          87.33f, 87.34f, 88.f, 88.7f, 88.72f, 88.7228f, 88.72284f, 88.7229f, 88.73f, 89.f,
                          90.f, 100.f, 103.9f, 103.97f, 103.98f, 104.f, 105.f, 150.f, 1e4f, 1e10f, 1e30f,
                          fmax, kInf};
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);  // -0 included
  v.push_back(kNaN);
  v.push_back(-kNaN);
  return v;
}

// Runs activate_row on x (out of place into a poisoned buffer, then in place), compares with the scalar
// activate(); returns the first few mismatches and counts them. The rows are placed inside a larger
// buffer whose floats past n must stay as they were.
int check_row(const Activation& act, const std::vector<float>& x, std::string& report) {
  const auto row = cpu::act_row_for(cpu_isa_default());
  const auto inplace = cpu::act_inplace_for(cpu_isa_default());
  const int64_t n = static_cast<int64_t>(x.size());
  int bad = 0;
  auto note = [&](const std::string& what) {
    if (what.empty()) return;
    if (bad++ < 5) report += what + "\n";
  };
  for (float poison : {kNaN, kSentinel}) {
    std::vector<float> y(x.size() + 17, poison), z(x.size() + 17, poison);
    row(y.data(), x.data(), n, act);
    std::copy(x.begin(), x.end(), z.begin());
    inplace(z.data(), n, act);
    for (int64_t i = 0; i < n; ++i) {
      const float want = cpu::activate(act, x[i]);
      note(mismatch(x[i], y[i], want, ulp_bound(act.kind), abs_bound(act)));
      if (std::memcmp(&y[i], &z[i], sizeof(float)) != 0 && !(std::isnan(y[i]) && std::isnan(z[i])))
        note("in place differs from out of place at x=" + std::to_string(x[i]));
    }
    for (size_t i = x.size(); i < y.size(); ++i)
      if (std::memcmp(&y[i], &poison, sizeof(float)) != 0 || std::memcmp(&z[i], &poison, sizeof(float)) != 0)
        note("wrote past the row at " + std::to_string(i));
  }
  return bad;
}

}  // namespace

TEST_CASE("activation_simd: special values at every position of every row length up to 3 * 16 + 5") {
  INFO("ISA level ", std::string(cpu_isa_name(cpu_isa_default())));
  const std::vector<float> specials = special_values();
  for (const Activation& act : all_activations()) {
    INFO(std::string(kind_name(act.kind)), " alpha ", act.alpha, " beta ", act.beta);
    int bad = 0;
    std::string report;
    for (int64_t n = 0; n <= 3 * 16 + 5; ++n)
      for (size_t shift = 0; shift < specials.size(); shift += n ? 1 : specials.size()) {
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) x[i] = specials[(shift + i) % specials.size()];
        bad += check_row(act, x, report);
      }
    CHECK_MESSAGE(bad == 0, report);
  }
}

TEST_CASE("activation_simd: random values in several ranges and random bit patterns") {
  INFO("ISA level ", std::string(cpu_isa_name(cpu_isa_default())));
  std::mt19937_64 rng(27);
  for (const Activation& act : all_activations()) {
    INFO(std::string(kind_name(act.kind)), " alpha ", act.alpha, " beta ", act.beta);
    int bad = 0;
    std::string report;
    for (float range : {1e-6f, 1.f, 4.f, 10.f, 30.f, 100.f, 120.f}) {
      std::uniform_real_distribution<float> dist(-range, range);
      std::vector<float> x(4099);
      for (float& v : x) v = dist(rng);
      bad += check_row(act, x, report);
    }
    std::vector<float> x(20011);
    for (float& v : x) {
      const uint32_t bits = static_cast<uint32_t>(rng());
      std::memcpy(&v, &bits, sizeof v);
    }
    bad += check_row(act, x, report);
    CHECK_MESSAGE(bad == 0, report);
  }
}

TEST_CASE("activation_simd: documented values") {
  const auto row = cpu::act_row_for(cpu_isa_default());
  auto one = [&](ActivationKind k, float v) {
    float x[1] = {v}, y[1] = {kNaN};
    row(y, x, 1, Activation{k, 1.f, 0.f});
    return y[0];
  };
  CHECK(one(ActivationKind::Sigmoid, -100.f) == 0.f);
  CHECK(one(ActivationKind::Sigmoid, -kInf) == 0.f);
  CHECK(one(ActivationKind::Sigmoid, kInf) == 1.f);
  CHECK(one(ActivationKind::Sigmoid, 0.f) == 0.5f);
  CHECK(std::isnan(one(ActivationKind::Silu, -kInf)));  // -inf / inf, as activate()
  CHECK(one(ActivationKind::Silu, kInf) == kInf);
  CHECK((one(ActivationKind::Silu, -100.f) == 0.f && std::signbit(one(ActivationKind::Silu, -100.f))));
  CHECK(std::isnan(one(ActivationKind::HardSwish, -kInf)));  // -inf * 0
  CHECK(one(ActivationKind::Tanh, 20.f) == 1.f);
  CHECK(one(ActivationKind::Tanh, -kInf) == -1.f);
  CHECK(std::signbit(one(ActivationKind::Tanh, -0.f)));
  CHECK(one(ActivationKind::Exp, 89.f) == kInf);
  CHECK(one(ActivationKind::Exp, -104.f) == 0.f);
  CHECK(one(ActivationKind::Exp, -100.f) > 0.f);  // a denormal, as glibc's expf
  CHECK(one(ActivationKind::Elu, -kInf) == -1.f);
  CHECK(one(ActivationKind::Softplus, kInf) == kInf);
  CHECK(one(ActivationKind::Softplus, -kInf) == 0.f);
  for (ActivationKind k : {ActivationKind::Tanh, ActivationKind::Sigmoid, ActivationKind::Silu, ActivationKind::Elu,
                           ActivationKind::Exp, ActivationKind::Softplus, ActivationKind::HardSwish})
    CHECK(std::isnan(one(k, kNaN)));
}

namespace {

std::vector<float> run_variant(const std::string& name, const NodeDesc& node,
                               const std::vector<std::vector<float>>& inputs) {
  const std::string op = op_name(op_type(node.params));
  const KernelVariant* v = KernelRegistry::global().find("cpu", op, name);
  REQUIRE_MESSAGE(v != nullptr, "no variant cpu/" << op << "/" << name);
  if (v->applicable) REQUIRE_MESSAGE(v->applicable(node), op << "/" << name << " not applicable");
  std::vector<float> workspace(v->workspace_bytes ? v->workspace_bytes(node) / sizeof(float) + 1 : 0);
  test::poison(workspace);
  std::shared_ptr<void> prepared = v->prepare ? v->prepare(node) : nullptr;
  std::vector<float> out(static_cast<size_t>(shape_numel(node.output_shapes.at(0))));
  test::poison(out);
  KernelCall call{node, {}, {out.data()}, workspace.empty() ? nullptr : workspace.data(), prepared.get()};
  for (const auto& in : inputs) call.inputs.push_back(in.data());
  v->run(call);
  return out;
}

// The node with its inputs (random in [-2, 2]: every kind's curved part), input 1 a constant weight.
struct Case {
  NodeDesc node;
  std::vector<std::vector<float>> inputs;
};
Case make_case(OpParams params, const std::vector<Shape>& in, const Shape& out, uint64_t seed) {
  Case c;
  c.node.params = std::move(params);
  c.node.input_shapes = in;
  c.node.output_shapes = {out};
  for (size_t i = 0; i < in.size(); ++i)
    c.inputs.push_back(test::random_vector(static_cast<size_t>(shape_numel(in[i])), seed + i, -2.f, 2.f));
  c.node.constants.assign(in.size(), nullptr);
  if (in.size() > 1) c.node.constants[1] = c.inputs[1].data();
  return c;
}

Conv2DParams conv(int k, int stride, int groups, const Activation& act) {
  Conv2DParams p;
  p.stride_h = p.stride_w = stride;
  p.pad = Padding2D{k / 2, k / 2, k / 2, k / 2};
  p.groups = groups;
  p.activation = act;
  return p;
}

}  // namespace

TEST_CASE("activation_simd in the kernels: fused activations match the reference") {
  INFO("ISA level ", std::string(cpu_isa_name(cpu_isa_default())));
  for (ActivationKind kind : {ActivationKind::Silu, ActivationKind::Sigmoid, ActivationKind::Tanh,
                              ActivationKind::HardSwish, ActivationKind::Elu, ActivationKind::Softplus,
                              ActivationKind::HardSigmoid, ActivationKind::Exp}) {
    const Activation act{kind, kind == ActivationKind::HardSigmoid ? 0.2f : 0.7f,
                         kind == ActivationKind::HardSigmoid ? 0.5f : 0.f};
    INFO(std::string(kind_name(kind)));
    auto check = [&](const std::string& variant, const Case& c) {
      INFO(variant);
      const std::vector<float> want = run_variant("reference", c.node, c.inputs);
      const std::vector<float> got = run_variant(variant, c.node, c.inputs);
      CHECK(test::rel_error(got, want) <= 1e-5);
    };
    // depthwise: planes of 7 x 11 and 37 x 41 (stride 1), 4 x 6 and 19 x 21 (stride 2)
    for (int k : {3, 5})
      for (int s : {1, 2})
        for (int64_t hw : {int64_t(7), int64_t(37)}) {
          const int64_t ho = (hw - 1) / s + 1, wo = (hw + 4 - 1) / s + 1;
          check("depthwise", make_case(conv(k, s, 3, act), {{2, 3, hw, hw + 4}, {3, 1, k, k}, {3}},
                                       {2, 3, ho, wo}, 11));
        }
    // packed_gemm (1x1: the input is the column matrix) and packed_implicit (3x3 stride 2)
    check("packed_gemm", make_case(conv(1, 1, 1, act), {{1, 5, 13, 11}, {9, 5, 1, 1}, {9}}, {1, 9, 13, 11}, 21));
    check("packed_gemm", make_case(conv(3, 1, 1, act), {{1, 5, 13, 11}, {9, 5, 3, 3}, {9}}, {1, 9, 13, 11}, 31));
    check("packed_implicit", make_case(conv(3, 2, 1, act), {{1, 5, 25, 23}, {9, 5, 3, 3}}, {1, 9, 13, 12}, 41));
    // winograd: full tile rows and ones cut by the right edge
    for (const char* w : {"winograd_f4x4", "winograd_f2x2"})
      check(w, make_case(conv(3, 1, 1, act), {{1, 4, 19, 37}, {6, 4, 3, 3}, {6}}, {1, 6, 19, 37}, 51));
    // the activation op: 2^16 + 5 floats, several OpenMP chunks and a tail
    ActivationParams ap;
    ap.activation = act;
    const Shape flat{1, 65541};
    check("direct", make_case(ap, {flat}, flat, 61));
    // squeeze_excite with an activation after the multiply
    SqueezeExciteParams se;
    se.hidden_activation = Activation{ActivationKind::Silu, 0.01f, 0.f};
    se.gate_activation = Activation{ActivationKind::Sigmoid, 0.01f, 0.f};
    se.activation = act;
    check("direct", make_case(se, {{2, 6, 9, 11}, {3, 6, 1, 1}, {3}, {6, 3, 1, 1}, {6}}, {2, 6, 9, 11}, 71));
  }
}

// The error bounds quoted in docs/kernels.md: every 64th float bit pattern (67M values; another step
// with INFER_SWEEP_STEP, 1 for all 2^32) per kind: the max ulp against activate() (glibc in float:
// what the tests bound), against the double-precision reference rounded to float (kernels/reference),
// and activate()'s own against that (where it is large, so is ours: the float formula overflows or
// rounds there, e.g. silu(-90) = -90 / (1 + inf) = -0, hardswish(1e38) = 1e38 * 6 / 6 = inf), then ours
// against the double reference where activate() is within 4 ulp of it (exact_ok). Where the double
// result is below FLT_MIN the absolute errors instead. Slow: skipped unless run with --no-skip,
// e.g. `INFER_CPU_ISA=avx2 build-cpu/tests/test_cpu_activation --no-skip -tc='*sweep*'`.
TEST_CASE("activation_simd error sweep" * doctest::skip()) {
  const auto row = cpu::act_row_for(cpu_isa_default());
  const char* step_env = std::getenv("INFER_SWEEP_STEP");
  const uint64_t step = step_env ? std::max<uint64_t>(1, std::strtoull(step_env, nullptr, 10)) : 64;
  const char* only = std::getenv("INFER_SWEEP_KIND");  // one kind's name, e.g. Silu
  std::printf("ISA level %s, every %llu-th float\n", cpu_isa_name(cpu_isa_default()),
              static_cast<unsigned long long>(step));
  std::printf("%-12s %6s %6s %6s %6s %10s %9s %10s %9s  %s\n", "kind", "alpha", "beta", "vs_f32", "exact",
              "f32_exact", "exact_ok", "abs<FMIN", "f32<FMIN", "worst x vs f32");
  constexpr int64_t kChunk = 1 << 16;
  std::vector<float> x(kChunk), y(kChunk);
  for (const Activation& act : all_activations()) {
    if (only && std::string(only) != kind_name(act.kind)) continue;
    int64_t worst = 0, worst_exact = 0, ref_exact = 0, worst_exact_ok = 0;
    double worst_abs = 0, ref_abs = 0;
    float worst_x = 0;
    for (uint64_t base = 0; base < (uint64_t(1) << 32); base += uint64_t(kChunk) * step) {
      int64_t m = 0;
      for (; m < kChunk && base + uint64_t(m) * step < (uint64_t(1) << 32); ++m) {
        const uint32_t bits = static_cast<uint32_t>(base + uint64_t(m) * step);
        std::memcpy(&x[m], &bits, sizeof(float));
      }
      row(y.data(), x.data(), m, act);
      for (int64_t i = 0; i < m; ++i) {
        const float want = cpu::activate(act, x[i]);
        if (std::isnan(want) || std::isnan(y[i])) {
          if (std::isnan(want) != std::isnan(y[i])) worst = std::numeric_limits<int64_t>::max(), worst_x = x[i];
          continue;
        }
        const int64_t d = ulp_distance(y[i], want);
        if (d > worst) worst = d, worst_x = x[i];
        const double exact = ref::detail::activate(act, double(x[i]));
        if (std::isnan(exact)) continue;
        if (std::fabs(exact) < std::numeric_limits<float>::min()) {
          worst_abs = std::max(worst_abs, std::fabs(double(y[i]) - exact));
          ref_abs = std::max(ref_abs, std::fabs(double(want) - exact));
        } else {
          worst_exact = std::max(worst_exact, ulp_distance(y[i], float(exact)));
          const int64_t r = ulp_distance(want, float(exact));
          ref_exact = std::max(ref_exact, r);
          if (r <= 4) worst_exact_ok = std::max(worst_exact_ok, ulp_distance(y[i], float(exact)));
        }
      }
    }
    std::printf("%-12s %6.3g %6.3g %6lld %6lld %10lld %9lld %10.3g %9.3g  %.9g\n", kind_name(act.kind), act.alpha,
                act.beta, static_cast<long long>(worst), static_cast<long long>(worst_exact),
                static_cast<long long>(ref_exact), static_cast<long long>(worst_exact_ok), worst_abs, ref_abs, worst_x);
  }
}
