// `infer-bench soak FILE`: one session run many times in one process (issue 17, "long runs"), to show
// that nothing grows: resident memory (VmRSS, /proc/self/status) and, on cuda, the device memory in use
// (cudaMemGetInfo, through the session's memory report) are sampled after the warm-up and at every
// tenth of the runs. Growth after the warm-up beyond --max-growth-kib fails the command (exit 2).
// On cuda every run() is a CUDA-graph replay (plus the input and output copies).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "bench.h"

namespace infer::bench {
namespace {

uint64_t rss_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string key; f >> key;) {
    if (key == "VmRSS:") {
      uint64_t kib = 0;
      f >> kib;
      return kib;
    }
    f.ignore(1 << 16, '\n');
  }
  throw Error("soak: cannot read VmRSS from /proc/self/status");
}

// Device memory in use now (every process on the GPU) as the session last noted it: benchmark() of one
// forward refreshes the note. 0 on cpu.
uint64_t device_used_kib(Session& session, const std::vector<Tensor>& inputs) {
  if (session.backend() != "cuda") return 0;
  session.benchmark(inputs, 1, 0);
  return session.memory().device_peak_bytes / 1024;
}

}  // namespace

int run_soak(const SoakOptions& o, const RunSettings& settings) {
  const Model model = Model::load(o.file);
  SessionOptions session_options;
  session_options.backend = settings.backend;
  session_options.precision = settings.precision;
  session_options.autotune = settings.autotune;
  session_options.batch = o.batch;
  Session session(model, session_options);
  const std::vector<Tensor> inputs = random_inputs(session, settings.seed);
  std::printf("soak: %s (%s) on %s (%s), precision %s, batch %lld: %d warm-up runs, then %d runs\n",
              o.file.c_str(), model.name().c_str(), session.backend().c_str(), session.device().c_str(),
              precision_name(session.precision()), static_cast<long long>(o.batch), settings.warmup,
              settings.runs);

  const std::vector<Tensor> first = session.run(inputs);
  for (int r = 1; r < settings.warmup; ++r) session.run(inputs);
  const uint64_t rss0 = rss_kib(), dev0 = device_used_kib(session, inputs);
  std::printf("%9s %12s %10s %14s %10s\n", "run", "rss KiB", "growth", "device KiB", "growth");
  std::printf("%9d %12llu %10s %14llu %10s\n", 0, static_cast<unsigned long long>(rss0), "-",
              static_cast<unsigned long long>(dev0), "-");

  uint64_t rss_max = rss0, dev_max = dev0;
  bool same = true;
  const int step = std::max(1, settings.runs / 10);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 1; r <= settings.runs; ++r) {
    const std::vector<Tensor> out = session.run(inputs);
    if (r == settings.runs)
      for (size_t k = 0; k < out.size(); ++k) same = same && out[k].data == first[k].data;
    if (r % step == 0 || r == settings.runs) {
      const uint64_t rss = rss_kib(), dev = device_used_kib(session, inputs);
      rss_max = std::max(rss_max, rss);
      dev_max = std::max(dev_max, dev);
      std::printf("%9d %12llu %+10lld %14llu %+10lld\n", r, static_cast<unsigned long long>(rss),
                  static_cast<long long>(rss - rss0), static_cast<unsigned long long>(dev),
                  static_cast<long long>(dev - dev0));
      std::fflush(stdout);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const uint64_t rss_growth = rss_max - rss0, dev_growth = dev_max - dev0;
  std::printf("soak: %d runs in %.1f s (%.3f ms per run); resident memory after warm-up %llu KiB, "
              "largest growth %llu KiB; device memory growth %llu KiB; bound %llu KiB; last output %s "
              "the first\n",
              settings.runs, seconds, 1000.0 * seconds / settings.runs,
              static_cast<unsigned long long>(rss0), static_cast<unsigned long long>(rss_growth),
              static_cast<unsigned long long>(dev_growth),
              static_cast<unsigned long long>(o.max_growth_kib), same ? "equals" : "DIFFERS FROM");
  if (!same) throw Error("soak: the last run's output differs from the first run's");
  if (rss_growth > o.max_growth_kib || dev_growth > o.max_growth_kib)
    throw Error("soak: memory grew by " + std::to_string(std::max(rss_growth, dev_growth)) +
                " KiB after the warm-up (bound " + std::to_string(o.max_growth_kib) + " KiB)");
  return 0;
}

}  // namespace infer::bench
