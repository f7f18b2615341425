// `infer-bench peak`: the machine's fp32 multiply-add peak at each CPU ISA level it supports, one thread
// and all threads, as infer::cpu_fma_peak_gflops (infer/cpu_isa.h; the register-only FMA loop is
// compiled per level in kernels/cpu/fma_peak.cc) measures it. What a kernel's GFLOP/s is compared with
// (issue 27: ResNet-50's 3x3 and 1x1 layers against the peak at their level).
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

namespace infer::bench {

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
    const double one = cpu_fma_peak_gflops(isa, 1, iters, repeats, &sink);
    const double many = cpu_fma_peak_gflops(isa, all, iters, repeats, &sink);
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
