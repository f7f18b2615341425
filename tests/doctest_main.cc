// doctest's main() for every test executable. Under INFER_CPU_ISA (the per-level ctest cases of the CPU
// kernel suites, tests/CMakeLists.txt) it first says which level runs, and skips the whole executable,
// with a line ctest recognises, when this CPU lacks that level: an AVX2 machine cannot test AVX-512.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "infer/cpu_isa.h"

int main(int argc, char** argv) {
  if (const char* want = std::getenv("INFER_CPU_ISA"); want && *want) {
    try {
      const infer::CpuIsa level = infer::parse_cpu_isa(want);
      if (level > infer::cpu_isa_supported()) {
        std::printf("CPU ISA %s skipped: this CPU supports up to %s\n", infer::cpu_isa_name(level),
                    infer::cpu_isa_name(infer::cpu_isa_supported()));
        return 0;
      }
      std::printf("CPU kernels at ISA level %s (INFER_CPU_ISA)\n", infer::cpu_isa_name(level));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: INFER_CPU_ISA: %s\n", e.what());
      return 2;
    }
  }
  return doctest::Context(argc, argv).run();
}
