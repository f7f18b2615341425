// Opening a backend by name (backend.h): "auto" resolved to cuda when this build has it and a GPU is
// present, else cpu; "reference" is the cpu backend offering only the reference variants. Checks that
// the precision is one the backend runs before anything is allocated.
#include <fmt/format.h>

#include "backend.h"
#include "infer/session.h"

namespace infer {

bool cuda_available() {
#ifdef INFER_WITH_CUDA
  return detail::cuda_device_available();
#else
  return false;
#endif
}

}  // namespace infer

namespace infer::detail {

OpenedBackend open_backend(const std::string& name, Precision precision, int device) {
  std::string chosen = name;
  if (chosen == "auto") {
#ifdef INFER_WITH_CUDA
    chosen = cuda_device_available() ? "cuda" : "cpu";
#else
    chosen = "cpu";
#endif
  }
  if (precision != Precision::FP32 && precision != Precision::TF32 && precision != Precision::FP16)
    throw Error("unknown precision value " + std::to_string(static_cast<int>(precision)));
  if (device < -1) throw Error("device must be >= 0 (a GPU's ordinal) or -1 (the current one), got " +
                               std::to_string(device));
  OpenedBackend opened;
  if (chosen == "cpu" || chosen == "reference") {
    if (device > 0)
      throw Error(fmt::format("device {} selects a GPU; backend {} has one device (0)", device, chosen));
    opened.name = chosen;
    opened.reference_only = chosen == "reference";
    if (precision != Precision::FP32)
      throw Error(fmt::format("precision {} needs the cuda backend (backend {} runs fp32 only)",
                              precision_name(precision), chosen));
    opened.backend = make_cpu_backend();
  } else if (chosen == "cuda") {
#ifdef INFER_WITH_CUDA
    opened.name = "cuda";
    opened.backend = make_cuda_backend(precision, device);
#else
    throw Error("this build of infer has no CUDA backend (built without a CUDA toolkit)");
#endif
  } else {
    throw Error("unknown backend '" + name + "' (choices: auto, cpu, cuda, reference)");
  }
  return opened;
}

}  // namespace infer::detail
