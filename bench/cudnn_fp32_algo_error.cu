// Diagnostic (not built by CMake): the error of each cuDNN forward-convolution algorithm in strict fp32
// (CUDNN_FMA_MATH, float data) against a float64 reference on up to 4096 sampled outputs, reported as
// max |y - y_ref| / max |y_ref|, for one shape given on the command line. Random inputs and weights in
// [-1, 1] (seed 1). What kernels/cuda/cudnn.cc's strict_fp32_algo is based on (docs/benchmarks.md).
// Build: nvcc -O2 -arch=sm_90 -o cudnn_fp32_algo_error bench/cudnn_fp32_algo_error.cu -lcudnn
// Run:   ./cudnn_fp32_algo_error N C H W K R S pad_h pad_w stride
#include <cudnn.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <random>
#define CK(x) do { auto s_ = (x); if (s_ != CUDNN_STATUS_SUCCESS) { printf("cudnn error %d at %s\n", (int)s_, #x); exit(1);} } while (0)
int main(int argc, char** argv) {
  int N = atoi(argv[1]), C = atoi(argv[2]), H = atoi(argv[3]), W = atoi(argv[4]), K = atoi(argv[5]),
      R = atoi(argv[6]), S = atoi(argv[7]), ph = atoi(argv[8]), pw = atoi(argv[9]), st = atoi(argv[10]);
  int P = (H + 2 * ph - R) / st + 1, Q = (W + 2 * pw - S) / st + 1;
  std::mt19937 rng(1); std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x((size_t)N * C * H * W), w((size_t)K * C * R * S), y((size_t)N * K * P * Q);
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng);
  float *dx, *dw, *dy; void* ws; size_t wsz = size_t(1) << 30;
  cudaMalloc(&dx, x.size() * 4); cudaMalloc(&dw, w.size() * 4); cudaMalloc(&dy, y.size() * 4); cudaMalloc(&ws, wsz);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice); cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice);
  cudnnHandle_t h; CK(cudnnCreate(&h));
  cudnnTensorDescriptor_t xd, yd; cudnnFilterDescriptor_t wd; cudnnConvolutionDescriptor_t cd;
  CK(cudnnCreateTensorDescriptor(&xd)); CK(cudnnCreateTensorDescriptor(&yd)); CK(cudnnCreateFilterDescriptor(&wd)); CK(cudnnCreateConvolutionDescriptor(&cd));
  CK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
  CK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, P, Q));
  CK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, S));
  CK(cudnnSetConvolution2dDescriptor(cd, ph, pw, st, st, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
  // sampled reference outputs (up to 4096)
  size_t total = y.size(), step = total > 4096 ? total / 4096 : 1;
  std::vector<size_t> idx; std::vector<double> ref;
  double maxref = 0;
  for (size_t i = 0; i < total; i += step) {
    size_t q = i % Q, p = (i / Q) % P, k = (i / Q / P) % K, n = i / Q / P / K;
    double s = 0;
    for (int c = 0; c < C; ++c) for (int r = 0; r < R; ++r) for (int t = 0; t < S; ++t) {
      int iy = (int)p * st - ph + r, ix = (int)q * st - pw + t;
      if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
      s += (double)x[((n * C + c) * H + iy) * W + ix] * w[((k * C + c) * R + r) * S + t];
    }
    idx.push_back(i); ref.push_back(s); maxref = std::max(maxref, std::fabs(s));
  }
  const char* names[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  printf("shape %dx%dx%dx%d * %dx%dx%dx%d pad %d,%d stride %d -> %dx%d\n", N, C, H, W, K, C, R, S, ph, pw, st, P, Q);
  for (int a = 0; a < 8; ++a) {
    size_t need = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, (cudnnConvolutionFwdAlgo_t)a, &need) != CUDNN_STATUS_SUCCESS || need > wsz) { printf("  %-22s n/a\n", names[a]); continue; }
    float one = 1, zero = 0;
    cudaMemset(dy, 0xFF, y.size() * 4);
    auto st2 = cudnnConvolutionForward(h, &one, xd, dx, wd, dw, cd, (cudnnConvolutionFwdAlgo_t)a, ws, need, &zero, yd, dy);
    if (st2 != CUDNN_STATUS_SUCCESS) { printf("  %-22s fails %d\n", names[a], (int)st2); continue; }
    cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
    double maxerr = 0;
    for (size_t j = 0; j < idx.size(); ++j) maxerr = std::max(maxerr, std::fabs(y[idx[j]] - ref[j]));
    printf("  %-22s rel err %.2e\n", names[a], maxerr / maxref);
  }
  return 0;
}
