// Registers the reference backend from the op table (engine/ops/op_def.h): for every op, a
// KernelVariant "reference" on "cpu" at priority 0 (the fallback every faster variant outranks) running
// its OpDef's `reference`, the adapter ref::run_<op> next to the op's loops in kernels/reference/. The
// registry has checked each call against the op's rules first (check_kernel_call), as for every backend.
#include <vector>

#include "engine/ops/op_def.h"
#include "infer/kernel.h"

namespace infer {

void register_reference_kernels(KernelRegistry& registry) {
  std::vector<KernelVariant> variants;
  for (int i = 0; i < kNumOpTypes; ++i) {
    const OpType op = static_cast<OpType>(i);
    const detail::OpDef& def = detail::op_def(op);
    variants.push_back({.op = op_name(op), .name = "reference", .priority = 0,
                        .fuses_prelu = def.prelu_epilogue, .fuses_input_epilogue = true,
                        .run = def.reference});
    if (def.reference_any_layout) variants.back().layouts = {Layout::NCHW, Layout::NHWC};
  }
  registry.add("cpu", std::move(variants));
}

}  // namespace infer
