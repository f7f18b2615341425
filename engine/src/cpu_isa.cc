// The one place that decides which CPU instruction-set level runs (infer/cpu_isa.h): GCC's
// __builtin_cpu_supports feature bits (libgcc reads cpuid and checks with xgetbv that the OS saves the
// YMM / ZMM state), never the CPU model, read once per process; INFER_CPU_ISA caps the result.
#include "infer/cpu_isa.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "infer/error.h"

namespace infer {

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Baseline: return "baseline";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "unknown";
}

CpuIsa parse_cpu_isa(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "baseline") return CpuIsa::Baseline;
  if (t == "avx2") return CpuIsa::Avx2;
  if (t == "avx512") return CpuIsa::Avx512;
  throw Error("unknown CPU ISA level '" + text + "' (choices: avx512, avx2, baseline)");
}

CpuIsa cpu_isa_supported() {
  static const CpuIsa supported = [] {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return avx512 ? CpuIsa::Avx512 : avx2 ? CpuIsa::Avx2 : CpuIsa::Baseline;
#else
    return CpuIsa::Baseline;
#endif
  }();
  return supported;
}

CpuIsa cpu_isa_default() {
  // Read once: a process that changed INFER_CPU_ISA later would otherwise mix levels across sessions.
  static const char* env = std::getenv("INFER_CPU_ISA");
  if (!env || !*env) return cpu_isa_supported();
  CpuIsa cap;
  try {
    cap = parse_cpu_isa(env);
  } catch (const Error& e) {
    throw Error(std::string("INFER_CPU_ISA: ") + e.what());
  }
  return std::min(cap, cpu_isa_supported());
}

}  // namespace infer
