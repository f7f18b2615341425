// cuDNN as a convolution provider behind infer's kernel variants (docs/design.md allows it, measured against
// our own kernels): descriptors for one convolution in either layout (NCHW, or NHWC with KRSC filters),
// the algorithm chosen once per problem and process by timing every one (cudnnFind*, the fastest whose
// workspace fits kWorkspaceCap among the deterministic ones; strict fp32 forces FMA math, no TF32, and
// allows Winograd and FFT: fp32 arithmetic, not one summation order), and the calls. Host code; built
// only when CMake finds cuDNN (INFER_WITH_CUDNN).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cudnn.h>

#include "kernels/cuda/context.h"
#include "kernels/cuda/gemm.h"

namespace infer::cuda::dnn {

cudnnContext* create_handle(cudaStream_t stream);  // an Error when cuDNN cannot start
void destroy_handle(cudnnContext* handle);

// The channel multiple cuDNN's tensor-core kernels want (gemm.h's rule).
inline int64_t channel_alignment(Precision p) { return tensor_core_multiple(p); }

// Algorithms whose workspace is larger are not considered (the workspace lives in the session arena).
constexpr size_t kWorkspaceCap = size_t(512) << 20;

// One convolution in cuDNN's terms: the forward problem x [N,C,H,W] * w [K,C,R,S] -> y [N,K,P,Q] with
// symmetric padding. A transposed convolution is the backward-data pass of the forward convolution
// from its output (x here) to its input (y here), its weights [C_in,C_out,KH,KW] being w [K,C,R,S].
// y may be a strided view (y_strides, NCHW-ordered element strides n,c,h,w; all 0 = packed).
struct Problem {
  bool backward_data = false;
  Precision precision = Precision::FP32;
  Layout layout = Layout::NCHW;
  int64_t N = 0, C = 0, H = 0, W = 0, K = 0, R = 0, S = 0, P = 0, Q = 0;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  // Forward only: C input channels in `groups` groups (the filter is [K, C/groups, R, S]); dilation of
  // the filter taps.
  int groups = 1, dilation_h = 1, dilation_w = 1;
  int64_t y_strides[4] = {0, 0, 0, 0};
  std::string key() const;  // identifies the problem in the process-wide algorithm cache
};

// The descriptors and algorithm of one problem, made in a variant's prepare() and used by every run.
class Conv {
 public:
  explicit Conv(const Problem& problem);  // finds the algorithm on first sight of the problem
  ~Conv();
  Conv(const Conv&) = delete;
  Conv& operator=(const Conv&) = delete;

  const Problem& problem() const { return problem_; }
  size_t workspace_bytes() const { return workspace_; }
  const char* algo_name() const;
  struct Descriptors;  // cuDNN's descriptors of the problem (cudnn.cc)

  // Forward: y = conv(x, w), or with `bias` (K values) and relu, y = relu(conv(x, w) + bias + z) in
  // one cudnnConvolutionBiasActivationForward, z (y's shape and layout, a residual) optional there.
  // Any other epilogue is the caller's (bias_activation).
  void forward(Context& ctx, const void* x, const void* w, const void* bias, bool relu, void* y,
               void* workspace, const void* z = nullptr) const;
  // Backward data: x = conv^T(y, w), i.e. the transposed convolution of y (reads y, writes x).
  void backward_data(Context& ctx, const void* y, const void* w, void* x, void* workspace) const;

 private:
  Problem problem_;
  std::unique_ptr<Descriptors> d_;
  int algo_ = 0;
  size_t workspace_ = 0;
};

// The node's constant per-channel input `input` (the bias, 2, or the per-channel PRelu slopes of
// fuse_prelu, 3; `channels` values) repeated `times` times, [t * channels + c] = v[c], uploaded in the
// node's precision: the bias and slopes of a width-folded layer (conv2d.cudnn_folded,
// conv_transpose2d.cudnn_folded). An Error naming the variant when the input is not a constant.
std::unique_ptr<DeviceArray> repeated_channels(const NodeDesc& node, size_t input, int64_t channels,
                                               int64_t times, const char* variant);

// y = act(conv(x, w) + bias + z) in the problem's layout: bias + ReLU (+ z) in cuDNN's fused call,
// every other epilogue (its other modes do not match infer's kinds: CLIPPED_RELU has no lower bound,
// SWISH no beta; cuDNN has no per-channel PRelu, whose `slope` [K] goes with act ActivationKind::PRelu)
// exactly by bias_activation / bias_activation_nhwc after a plain forward. bias (K values) and z (y's
// shape, a residual) may be null. Shared by the conv2d and conv_pool2d variants.
void forward_epilogue(Context& ctx, const Conv& conv, const void* x, const void* w, const void* bias,
                      const Activation& act, void* y, void* workspace, const void* z = nullptr,
                      const void* slope = nullptr);

// The workspace the problem's algorithm needs (finds it on first sight): for workspace_bytes().
size_t workspace_bytes(const Problem& problem);

}  // namespace infer::cuda::dnn
