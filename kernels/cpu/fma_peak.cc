// The machine's fp32 multiply-add peak at one CPU ISA level (infer/cpu_isa.h, cpu_fma_peak_gflops):
// each OpenMP thread runs a loop of kChains independent vector FMAs (a * x + b, contracted to FMA by
// -ffp-contract=fast; baseline x86-64 has no FMA, so there it is a multiply and an add) on registers
// only, compiled per level with isa.h's targets. A multiply-add counts 2 FLOPs. What a kernel's GFLOP/s
// is compared with (infer-bench peak; issue 27: ResNet-50's layers against the peak at their level).
#include <omp.h>

#include <chrono>

#include "infer/cpu_isa.h"
#include "kernels/cpu/isa.h"

namespace infer {
namespace {

constexpr int kChains = 12;  // independent accumulators: latency 4-5 x 2 FMA pipes, within 16 registers

template <class I>
INFER_INLINE float fma_loop_body(int64_t iters, float seed) {
  using V = typename I::Vec;
  V acc[kChains];
  const V a = V{} + (1.f + 1e-7f * seed), b = V{} + 1e-7f;
  for (int i = 0; i < kChains; ++i) acc[i] = V{} + seed * float(i + 1);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * a + b;
  float s = 0.f;
  for (int i = 0; i < kChains; ++i) s += acc[i][0];
  return s;  // keeps the loop alive
}
INFER_PER_ISA(float, fma_loop, fma_loop_body, (int64_t iters, float seed), (iters, seed))

}  // namespace

double cpu_fma_peak_gflops(CpuIsa isa, int threads, int64_t iters, int repeats, float* sink) {
  const auto loop = fma_loop_for(isa);
  const int lanes = cpu::isa::shape(isa).lanes;
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    float s = 0.f;
#pragma omp parallel num_threads(threads) reduction(+ : s)
    s += loop(iters, float(omp_get_thread_num() + 1));
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sink) *sink += s;
    const double flops = 2.0 * kChains * lanes * double(iters) * threads;
    if (sec > 0 && flops / sec / 1e9 > best) best = flops / sec / 1e9;
  }
  return best;
}

}  // namespace infer
