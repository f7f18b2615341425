// `infer-bench peak`: the machine's fp32 multiply-add peak at each CPU ISA level it supports, one thread
// and all threads (OpenMP): a loop of kChains independent vector FMAs (a * x + b, contracted to FMA by
// -ffp-contract=fast; baseline x86-64 has no FMA, so there it is a multiply and an add) on registers only,
// compiled per level with kernels/cpu/isa.h's targets. A multiply-add counts 2 FLOPs. What a kernel's
// GFLOP/s is compared with (issue 27: ResNet-50's 3x3 and 1x1 layers against the peak at their level).
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench.h"
#include "infer/cpu_isa.h"
#include "kernels/cpu/isa.h"

namespace infer::bench {
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

int lanes(CpuIsa isa) { return cpu::isa::shape(isa).lanes; }

// GFLOP/s of `threads` threads each running the loop `iters` times; the best of `repeats`.
double peak_gflops(CpuIsa isa, int threads, int64_t iters, int repeats, float& sink) {
  const auto loop = fma_loop_for(isa);
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    float s = 0.f;
#pragma omp parallel num_threads(threads) reduction(+ : s)
    s += loop(iters, float(omp_get_thread_num() + 1));
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink += s;
    const double flops = 2.0 * kChains * lanes(isa) * double(iters) * threads;
    if (sec > 0 && flops / sec / 1e9 > best) best = flops / sec / 1e9;
  }
  return best;
}

}  // namespace

int run_peak(const RunSettings& settings, const std::string& json_path) {
  const int all = settings.threads > 0 ? settings.threads : omp_get_max_threads();
  const int64_t iters = 20'000'000;  // ~0.1-0.5 s per repeat
  const int repeats = std::max(3, std::min(settings.runs, 10));
  float sink = 0.f;
  nlohmann::ordered_json j;
  j["what"] = "fp32 multiply-add peak (register-only FMA loop), GFLOP/s, best of repeats";
  j["cpu_isa_supported"] = cpu_isa_name(cpu_isa_supported());
  j["threads"] = all;
  nlohmann::ordered_json levels = nlohmann::ordered_json::array();
  std::printf("fp32 multiply-add peak (register-only FMA loop, best of %d), GFLOP/s\n", repeats);
  std::printf("%-9s %12s %12s\n", "isa", "1 thread", fmt::format("{} threads", all).c_str());
  for (CpuIsa isa : {CpuIsa::Avx512, CpuIsa::Avx2, CpuIsa::Baseline}) {
    if (isa > cpu_isa_supported()) continue;
    const double one = peak_gflops(isa, 1, iters, repeats, sink);
    const double many = peak_gflops(isa, all, iters, repeats, sink);
    std::printf("%-9s %12.1f %12.1f\n", cpu_isa_name(isa), one, many);
    levels.push_back({{"isa", cpu_isa_name(isa)}, {"gflops_1_thread", one}, {"gflops_all_threads", many}});
  }
  j["levels"] = std::move(levels);
  j["sink"] = sink;
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << j.dump(2) << "\n";
    if (!out) throw Error("cannot write " + json_path);
  }
  return 0;
}

}  // namespace infer::bench
