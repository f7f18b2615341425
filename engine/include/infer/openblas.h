// Which kernels OpenBLAS runs. OpenBLAS (the work of the cpu variants whose KernelVariant::isa is
// OpenBlas) picks its kernels itself once when it loads (by CPU model; OPENBLAS_CORETYPE=Haswell,
// Prescott, ... set before the process starts overrides it), so INFER_CPU_ISA and
// SessionOptions::cpu_isa cap infer's own kernels but not OpenBLAS's. Public, C++17.
#pragma once

#include <string>

#include "infer/cpu_isa.h"

namespace infer {

// The name of the kernels OpenBLAS picked ("SkylakeX", "Haswell", "Zen", "Prescott", ...).
std::string openblas_core();

// The lowest of infer's levels whose instructions cover those kernels (AVX-only cores count as
// Avx2: above baseline x86-64; the SSE cores as Baseline; a core name it does not know as
// cpu_isa_supported()), decided once a process. The conv_transpose2d heuristic asks it, so a level
// capped with OpenBLAS capped alike chooses what a CPU of that level would.
CpuIsa openblas_isa();

}  // namespace infer
