// Registers the CUDA conv2d variants of gemm.cu and direct.cu (INFER_REGISTER_KERNELS, infer/kernel.h)
// in one table, in the order ties are broken by; each applies a per-channel PRelu epilogue
// (fuses_prelu). The other files of this folder (cudnn.cc, cutlass.cu, depthwise.cu,
// small_cout_nhwc.cu, small_cin_nhwc.cu) register their own. Host code.
#include "kernels/cuda/conv2d/common.h"
#include "infer/kernel.h"

namespace infer::cuda {

using namespace conv;

INFER_REGISTER_KERNELS(conv2d) {
  registry.add("cuda", {
      // priority is the static order; the heuristic uses priority_for
      {.op = "conv2d", .name = "direct_small_cout", .priority = 30,
       .priority_for = small_cout_priority, .fuses_prelu = true, .applicable = small_cout_applicable,
       .run = run_small_cout},
      {.op = "conv2d", .name = "gemm_1x1", .priority = 20, .fuses_prelu = true,
       .applicable = gemm_1x1_applicable, .workspace_bytes = im2col_gemm_workspace,
       .run = run_gemm_1x1},  // split-K's partial sums
      {.op = "conv2d", .name = "gemm_1x1_nhwc", .priority = 55, .priority_for = gemm_1x1_nhwc_priority,
       .layouts = {Layout::NHWC}, .fuses_prelu = true, .applicable = gemm_1x1_applicable,
       .run = run_gemm_1x1_nhwc},
      {.op = "conv2d", .name = "im2col_gemm", .priority = 10, .fuses_prelu = true,
       .applicable = conv2d_ungrouped, .workspace_bytes = im2col_gemm_workspace, .run = run_im2col_gemm},
      {.op = "conv2d", .name = "direct", .priority = 1, .fuses_prelu = true, .run = run_direct},  // any conv2d node
  });
}

}  // namespace infer::cuda
