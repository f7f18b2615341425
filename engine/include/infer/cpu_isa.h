// CPU instruction-set levels the cpu backend's kernels are compiled for, and the level a process or a
// session runs (docs/design.md, "CPU"). The level is decided from CPU *features*, never from
// the CPU model, once per process: the best level the CPU (and OS) supports, capped by the
// environment variable INFER_CPU_ISA (like oneDNN's ONEDNN_MAX_CPU_ISA) and per session by
// SessionOptions::cpu_isa. A cap above what the CPU has is no cap. Public API: C++17.
#pragma once

#include <cstdint>
#include <string>

namespace infer {

// Ordered: a higher level includes every lower one.
//   Baseline  x86-64 (SSE2), what every 64-bit x86 CPU runs; the build's default code
//   Avx2      AVX2 + FMA (x86-64-v3: Intel Haswell and later, AMD Zen and later)
//   Avx512    AVX-512 F + BW + VL + DQ (x86-64-v4: Intel Skylake-SP and later, AMD Zen 4 and later)
enum class CpuIsa : uint8_t { Baseline = 0, Avx2 = 1, Avx512 = 2 };

const char* cpu_isa_name(CpuIsa isa);  // "baseline", "avx2", "avx512"
// "baseline" | "avx2" | "avx512" (case-insensitive); an Error naming the text and the choices otherwise.
CpuIsa parse_cpu_isa(const std::string& text);

// The highest level this CPU and OS support (feature tests via cpuid / xgetbv), whatever the caps.
CpuIsa cpu_isa_supported();
// The process's level: cpu_isa_supported() capped by INFER_CPU_ISA when that is set. Decided on first
// use and then fixed; an INFER_CPU_ISA that does not parse is an Error (on every call).
CpuIsa cpu_isa_default();

// The fp32 multiply-add peak of `threads` OpenMP threads at level `isa` (<= cpu_isa_supported()), in
// GFLOP/s (a multiply-add counts 2): the best of `repeats` runs of a register-only loop of independent
// vector FMAs, `iters` iterations per thread (20M: ~0.1-0.5 s). *sink (may be null) accumulates the
// loop's results so that nothing is optimised away. What infer-bench peak reports.
double cpu_fma_peak_gflops(CpuIsa isa, int threads, int64_t iters, int repeats, float* sink);

}  // namespace infer
