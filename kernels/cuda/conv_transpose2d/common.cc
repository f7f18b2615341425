// The shared part of the CUDA conv_transpose2d variants (common.h): the unpacking of a call (checked by check_kernel_call before)
// and the flipped weights [C_out][C_in/groups][KH][KW] that conventional and flipped_conv prepare once per
// session (host code).
#include "kernels/cuda/conv_transpose2d/common.h"

#include <vector>

namespace infer::cuda::tconv {

std::shared_ptr<void> prepare_flipped(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  const float* w = host_weight(node, "flipped_conv");
  std::vector<float> f(static_cast<size_t>(d.CO * d.CIG * d.KH * d.KW));
  for (int64_t co = 0; co < d.CO; ++co) {
    const int64_t g = co / d.COG, c = co % d.COG;  // co's group and its index there
    for (int64_t ci = 0; ci < d.CIG; ++ci)
      for (int64_t ky = 0; ky < d.KH; ++ky)
        for (int64_t kx = 0; kx < d.KW; ++kx)
          f[static_cast<size_t>(((co * d.CIG + ci) * d.KH + ky) * d.KW + kx)] =
              w[(((g * d.CIG + ci) * d.COG + c) * d.KH + (d.KH - 1 - ky)) * d.KW + (d.KW - 1 - kx)];
  }
  auto out = std::make_shared<FlippedWeights>();
  out->made_for = prepared_for(d, node.precision);
  out->w = upload(f.data(), f.size(), node.precision);
  return out;
}

const FlippedWeights& flipped_of(const KernelCall& call, const TconvDims& d, const char* variant) {
  const auto* f = static_cast<const FlippedWeights*>(call.prepared);
  if (!f || !(f->made_for == prepared_for(d, call.node.precision)))
    throw Error(std::string("cuda conv_transpose2d.") + variant + ": not prepared for this node");
  return *f;
}

}  // namespace infer::cuda::tconv
