// Per-ISA compilation of the CPU kernels (docs/design.md, "CPU"). A hot loop is written once
// as an always_inline template over an ISA traits struct (Avx512, Avx2, Baseline: vector width and
// register-tile shape), and INFER_PER_ISA defines one out-of-line function per level, each compiled
// with that level's target attribute so the inlined body is code-generated for it; NAME_for(isa)
// returns the one to call. The level comes from NodeDesc::isa (infer/cpu_isa.h decides it once per
// process from CPU features); never GCC's target_clones("arch=...") resolvers, which test the CPU model.
// Bodies must not call non-inline helpers that hold vector code: those compile for baseline only (a
// body too large to compile as one function calls out-of-line overloads on the traits type, each
// with its level's INFER_TARGET_*: depthwise_nhwc.cc's dw_channels).
#pragma once

#include "infer/cpu_isa.h"

// No tune= in the targets: a function whose tuning differs from the build's does not get ordinary
// inline functions (std::min, small helpers) inlined into it by GCC, they become calls into baseline
// code (tune=haswell on AVX2 did that); GCC 12's generic tuning does not split unaligned 256-bit loads.
#define INFER_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define INFER_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define INFER_INLINE __attribute__((always_inline)) inline

namespace infer::cpu::isa {

// The register tile of the packed fp32 GEMM (gemm_microkernel.h): kMR rows of A broadcast against kNV
// vectors of kLanes columns of B, so kMR * kNV accumulators + kNV B vectors + 1 broadcast stay within
// the level's vector registers (no spills; docs/kernels.md "CPU ISA levels" shows the check):
//   AVX-512: 32 zmm, 8 x 3 x 16 = 24 + 3 + 1
//   AVX2:    16 ymm, 4 x 3 x 8  = 12 + 3 + 1 (an 8 x 3 tile of the AVX-512 shape spilled: 48 ymm)
//   baseline: 16 xmm, 4 x 2 x 4 = 8 + 2 + 1 + a temporary (no FMA: a product is a register first)
// RowVec holds one column's kMR rows (the GEMM's last 1..kLanes-1 columns, one per accumulator).
struct Avx512 {
  static constexpr CpuIsa kIsa = CpuIsa::Avx512;
  static constexpr int kLanes = 16, kMR = 8, kNV = 3;
  typedef float Vec __attribute__((vector_size(64)));
  typedef float RowVec __attribute__((vector_size(32)));
};
struct Avx2 {
  static constexpr CpuIsa kIsa = CpuIsa::Avx2;
  static constexpr int kLanes = 8, kMR = 4, kNV = 3;
  typedef float Vec __attribute__((vector_size(32)));
  typedef float RowVec __attribute__((vector_size(16)));
};
struct Baseline {
  static constexpr CpuIsa kIsa = CpuIsa::Baseline;
  static constexpr int kLanes = 4, kMR = 4, kNV = 2;
  typedef float Vec __attribute__((vector_size(16)));
  typedef float RowVec __attribute__((vector_size(16)));
};

// The same numbers at run time (workspace sizes, packing, blocking are decided outside the bodies).
struct Shape {
  int lanes, mr, nv;
  int tile_cols() const { return lanes * nv; }
};
constexpr Shape shape(CpuIsa isa) {
  return isa == CpuIsa::Avx512 ? Shape{Avx512::kLanes, Avx512::kMR, Avx512::kNV}
         : isa == CpuIsa::Avx2 ? Shape{Avx2::kLanes, Avx2::kMR, Avx2::kNV}
                               : Shape{Baseline::kLanes, Baseline::kMR, Baseline::kNV};
}

}  // namespace infer::cpu::isa

namespace infer::cpu {

// v as it is, opaque to the compiler: a product kept a rounding of its own, never contracted with the
// sum after it into one FMA (-ffp-contract=fast would), where a kernel must give another kernel's or the
// reference's values bit for bit. clang (the fuzz build, its kernels at -O0) cannot give a 256- or
// 512-bit value an "x" register there, so it goes through memory instead.
template <class T>
INFER_INLINE T opaque(T v) {
#if defined(__clang__)
  __asm__("" : "+m"(v));
#else
  __asm__("" : "+x"(v));
#endif
  return v;
}

}  // namespace infer::cpu

// Defines NAME_avx512, NAME_avx2 and NAME_baseline (static), each `RET NAME_x PARAMS { return
// BODY<isa::X> ARGS; }` compiled for its level, and `NAME_for(CpuIsa)` returning a pointer to the one
// for a level. PARAMS and ARGS are parenthesised lists; BODY is an always_inline template.
#define INFER_PER_ISA(RET, NAME, BODY, PARAMS, ARGS)                                                 \
  [[maybe_unused]] static INFER_TARGET_AVX512 RET NAME##_avx512 PARAMS {                             \
    return BODY<::infer::cpu::isa::Avx512> ARGS;                                                     \
  }                                                                                                  \
  [[maybe_unused]] static INFER_TARGET_AVX2 RET NAME##_avx2 PARAMS {                                 \
    return BODY<::infer::cpu::isa::Avx2> ARGS;                                                       \
  }                                                                                                  \
  [[maybe_unused]] static RET NAME##_baseline PARAMS { return BODY<::infer::cpu::isa::Baseline> ARGS; } \
  [[maybe_unused]] static auto NAME##_for(::infer::CpuIsa level) {                                   \
    return level == ::infer::CpuIsa::Avx512 ? &NAME##_avx512                                         \
           : level == ::infer::CpuIsa::Avx2 ? &NAME##_avx2                                           \
                                            : &NAME##_baseline;                                      \
  }
