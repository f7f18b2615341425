// The pieces of a conv2d KernelCall that the CPU variants with a prepared weight read (packed_gemm,
// packed_implicit, winograd_f4x4 / f2x2): input, bias, residual (add_residual), output, the fused
// activation with the per-channel PRelu's slopes, the prepared state and the workspace, with the checks they share (an Error naming the
// variant, not a crash, where prepare() was not run or the workspace is missing). No allocation.
#pragma once

#include <string>
#include <variant>

#include "infer/kernel.h"
#include "infer/error.h"
#include "infer/ops.h"

namespace infer::cpu {

template <class Prepared>
struct ConvCall {
  const float* x;         // [N, C_in, H, W]
  const float* bias;      // [C_out] or nullptr
  const float* residual;  // [N, C_out, HO, WO] or nullptr
  float* y;               // [N, C_out, HO, WO]
  Activation act;
  const float* slope;  // [C_out] where act is a per-channel PRelu (channel_activation), else nullptr
  const Prepared* prep;
  float* workspace;  // nullptr where the variant needs none for this node
};

template <class Prepared>
ConvCall<Prepared> unpack_conv_call(const KernelCall& call, const char* variant, bool needs_workspace) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  const auto* prep = static_cast<const Prepared*>(call.prepared);
  if (!prep) throw Error(std::string("cpu conv2d.") + variant + ": not prepared for this node");
  if (needs_workspace && !call.workspace)
    throw Error(std::string("cpu conv2d.") + variant + ": needs a workspace, got none");
  return {call.inputs[0],
          call.inputs.size() >= 3 ? call.inputs[2] : nullptr,
          p.add_residual ? call.inputs[3] : nullptr,
          call.outputs[0],
          fused_activation(call.node.params),
          prelu_slope(call),
          prep,
          static_cast<float*>(call.workspace)};
}

}  // namespace infer::cpu
