// The hand-written CUDA GEMMs' one epilogue (kernels/cuda/gemm_epilogue.cuh) on its own: a test kernel
// applies GemmEpilogue to random sums through store(), store_pair(), finish() and apply<A> (launched
// through dispatch_fixed_epilogue, as the depthwise kernels are) for every activation,
// with and without bias, residual and per-channel PRelu slopes (no graph node reaches them yet), float
// and half storage, outputs poisoned; checked against the formula on the host (the reference's
// activation in double), exactly where the arithmetic is exact. Skipped without a CUDA device.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/reference/common.h"

using namespace infer;

namespace {

enum class Call { Store, StorePair, Finish, Fixed };

// Element i has channel i % C (NHWC: consecutive elements are consecutive channels, as store_pair needs).
template <class T, class P>
__global__ void epilogue_kernel(const float* sums, T* y, int64_t n, int64_t C, cuda::GemmEpilogue<T, P> ep,
                                Call call) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % C;
    switch (call) {
      case Call::Store: ep.store(y, i, ep.channel(c), sums[i]); break;
      case Call::StorePair:
        if (i % 2 == 0) ep.store_pair(y, i, ep.channel(c), ep.channel(c + 1), sums[i], sums[i + 1]);
        break;
      case Call::Finish: {  // a kernel whose sums already hold the bias
        const auto ch = ep.channel(c);
        y[i] = cuda::from_float<T>(ep.finish(sums[i] + ch.bias, ep.slope_channel(c), i));
        break;
      }
    }
  }
}

// Call::Fixed: apply<A> with the activation as dispatch_fixed_epilogue picks it (a compile-time kind for
// bias + none / ReLU / Clip / SiLU / HardSwish alone, the generic path otherwise), as the depthwise
// kernels store.
template <class T, class P, int A>
__global__ void fixed_epilogue_kernel(const float* sums, T* y, int64_t n, int64_t C, cuda::GemmEpilogue<T, P> ep) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = cuda::from_float<T>(ep.template apply<A>(sums[i], ep.channel(i % C), i));
}

// Kinds whose device arithmetic is the host's to the bit (float sums, selects, one multiply).
bool exact_kind(ActivationKind k) {
  return k == ActivationKind::None || k == ActivationKind::Relu || k == ActivationKind::LeakyRelu ||
         k == ActivationKind::Clip || k == ActivationKind::Neg || k == ActivationKind::Abs;
}

template <class T, class P>
void check_epilogue(Precision p, ActivationKind kind, bool with_bias, bool with_residual, bool with_slope, Call call,
                    std::mt19937_64& rng) {
  constexpr bool kHalf = sizeof(T) == 2;
  const Precision pp = sizeof(P) == 2 ? Precision::FP16 : Precision::FP32;
  const int64_t C = 6, n = C * 37;
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<float> sums(n), bias(C), slope(C), residual(n);
  for (float& v : sums) v = u(rng);
  sums[5] = 0.f;  // a zero (PRelu leaves it, Relu too)
  sums[7] = NAN;  // NaN must pass through every step (PRelu is a select)
  for (float& v : bias) v = u(rng) / 3;
  for (float& v : slope) v = u(rng) / 6;
  for (float& v : residual) v = u(rng) / 3;
  test::round_to_storage(bias, pp);
  test::round_to_storage(slope, pp);
  test::round_to_storage(residual, p);
  Activation act;
  act.kind = kind;
  if (kind == ActivationKind::Clip) act.alpha = -1.f, act.beta = 1.5f;
  if (kind == ActivationKind::HardSigmoid) act.alpha = 0.2f, act.beta = 0.5f;
  if (kind == ActivationKind::LeakyRelu || kind == ActivationKind::Elu) act.alpha = 0.3f;

  auto d_sums = test::to_device(sums, Precision::FP32);
  auto d_bias = test::to_device(bias, pp);
  auto d_slope = test::to_device(slope, pp);
  auto d_res = test::to_device(residual, p);
  auto d_y = test::to_device(std::vector<float>(n, 0.f), p, test::kGuardBytes);
  INFER_CUDA_CHECK(cudaMemset(d_y->data(), 0xFF, n * sizeof(T) + test::kGuardBytes));  // poisoned
  const auto ep = cuda::gemm_epilogue<T, P>(with_bias ? d_bias->data() : nullptr, act,
                                            with_residual ? d_res->data() : nullptr,
                                            with_slope ? d_slope->data() : nullptr);
  if (call == Call::Fixed)
    cuda::dispatch_fixed_epilogue(ep, [&](auto a) {
      fixed_epilogue_kernel<T, P, decltype(a)::value>
          <<<4, 64>>>(d_sums->template as<float>(), static_cast<T*>(d_y->data()), n, C, ep);
    });
  else
    epilogue_kernel<T, P><<<4, 64>>>(d_sums->template as<float>(), static_cast<T*>(d_y->data()), n, C, ep, call);
  INFER_CUDA_CHECK(cudaGetLastError());
  INFER_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> y = test::download(d_y->data(), n, p);
  const auto guard = test::download_bytes(static_cast<char*>(d_y->data()) + n * sizeof(T), test::kGuardBytes);
  CHECK(test::all_poison(guard));

  const std::string what = std::string(kHalf ? "half" : "float") + (sizeof(P) == 2 ? " (half bias)" : "") +
                           " act " + std::to_string(int(kind)) + (with_bias ? " bias" : "") +
                           (with_residual ? " residual" : "") + (with_slope ? " slope" : "") + " call " +
                           std::to_string(int(call));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % C;
    float v = sums[i] + (with_bias ? bias[c] : 0.f);
    if (with_residual) v += residual[i];
    v = static_cast<float>(ref::detail::activate(act, v));
    if (with_slope) v = v < 0.f ? slope[c] * v : v;
    const float want = kHalf ? test::round_to_half(v) : v;
    INFO(what << " element " << i << ": got " << y[i] << ", want " << want);
    if (std::isnan(want)) {
      CHECK(std::isnan(y[i]));
    } else if (exact_kind(kind)) {
      CHECK(y[i] == want);  // the same float operations in the same order
    } else {
      // __expf / tanhf against double, then one rounding to the storage type
      const float tol = (kHalf ? 2e-3f : 2e-5f) * (1.f + std::fabs(want));
      CHECK(std::fabs(y[i] - want) <= tol);
    }
  }
}

}  // namespace

CUDA_TEST_CASE("gemm_epilogue: bias, residual, every activation and PRelu slopes, float and half storage") {
  std::mt19937_64 rng(28);
  for (int k = 0; k < kNumActivationKinds; ++k) {
    const auto kind = static_cast<ActivationKind>(k);
    for (int flags = 0; flags < 8; ++flags) {
      const bool b = flags & 1, r = flags & 2, s = flags & 4;
      for (Call call : {Call::Store, Call::StorePair, Call::Finish, Call::Fixed}) {
        check_epilogue<float, float>(Precision::FP32, kind, b, r, s, call, rng);
        check_epilogue<__half, float>(Precision::FP16, kind, b, r, s, call, rng);
        check_epilogue<__half, __half>(Precision::FP16, kind, b, r, s, call, rng);
      }
    }
  }
}

CUDA_TEST_CASE("gemm_epilogue: PRelu scales only the negative results, per channel, after the activation") {
  std::mt19937_64 rng(7);
  // LeakyRelu then PRelu: a negative sum is scaled twice (alpha, then its channel's slope); exact
  check_epilogue<float, float>(Precision::FP32, ActivationKind::LeakyRelu, true, false, true, Call::Store, rng);
  // Relu then PRelu: nothing is left negative, so the slopes change nothing
  check_epilogue<float, float>(Precision::FP32, ActivationKind::Relu, false, true, true, Call::Store, rng);
}
