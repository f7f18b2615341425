// Diagnostic (not built by CMake): the int8 GEMM of kernels/cpu/qgemm.h against the fp32 register-tile
// GEMM the convolutions use (kernels/cpu/gemm_microkernel.h), one thread, same M x N x K, at each ISA
// level this CPU has: what issue 30's "int8 >= 2x fp32 on the CPU" can reach from the GEMM alone; and
// the u8s8 form (vpmaddubsw, 7-bit weights; AVX2 and AVX-512) on row-major uint8 A, as quantized_conv2d
// runs it; and where the CPU has the level's VNNI (AVX-512 VNNI, AVX-VNNI), the same form on vpdpbusd
// with 8-bit weights ("vnni").
// Shapes: ResNet-50's GEMMs at batch 1 as conv2d.packed_gemm runs them (M = C_out rows of the packed
// weight, N = output pixels, K = C_in * KH * KW); the fp32 GEMM also in BLIS's K-blocked order. Packing
// excluded from both (weights are packed once; A's packing is timed apart). Build and run:
//   g++ -O3 -std=c++20 -fopenmp -ffp-contract=fast -Wno-psabi -I. -Iengine/include bench/cpu_qgemm.cc \
//       kernels/cpu/qgemm.cc engine/src/cpu_isa.cc -o /tmp/cpu_qgemm && /tmp/cpu_qgemm
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/qgemm.h"

using namespace infer;
using namespace infer::cpu;

namespace {

// C[M][N] = A[M][K] B[K][N] with A packed (mk::pack_a), B row-major with N a multiple of the panel, in
// conv2d.packed_gemm's order: column blocks of B sized for L2 (384 KiB), in each a row tile of A
// (its K x kMR floats in L1) against every column tile of the block, full K at once (B from L2).
template <class I>
INFER_INLINE void sgemm_body(const float* a, const float* b, float* c, int64_t M, int64_t N, int64_t K) {
  constexpr int NV = I::kNV, L = I::kLanes, MR = I::kMR, NR = NV * L;
  const int64_t nc = std::max<int64_t>(NR, (384 << 10) / (K * 4) / NR * NR);
  for (int64_t c0 = 0; c0 < N; c0 += nc)
    for (int64_t m0 = 0; m0 < M; m0 += MR)
      for (int64_t n0 = c0; n0 < std::min(N, c0 + nc); n0 += NR) {
        typename I::Vec acc[MR][NV];
        mk::accumulate<I, NV>(a + m0 * K, b + n0, N, K, acc);
        for (int r = 0; r < MR && m0 + r < M; ++r)
          for (int q = 0; q < NV; ++q) mk::store(c + (m0 + r) * N + n0 + q * L, acc[r][q]);
      }
}
INFER_PER_ISA(void, sgemm, sgemm_body,
              (const float* a, const float* b, float* c, int64_t M, int64_t N, int64_t K), (a, b, c, M, N, K))

// The same product in BLIS's loop order: B packed into panels [N / NR][K][NR] (contiguous), K in blocks
// of kc so that a panel's block (kc x NR floats) stays in L1 while every row tile of A passes over it;
// C accumulated across the K blocks (loaded and stored back).
template <class I>
INFER_INLINE void sgemm_blocked_body(const float* a, const float* bp, float* c, int64_t M, int64_t N, int64_t K,
                                     int64_t kc) {
  constexpr int NV = I::kNV, L = I::kLanes, MR = I::kMR, NR = NV * L;
  using V = typename I::Vec;
  for (int64_t n0 = 0; n0 < N; n0 += NR)
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t kk = std::min(kc, K - k0);
      for (int64_t m0 = 0; m0 < M; m0 += MR) {
        V acc[MR][NV];
        mk::accumulate<I, NV>(a + m0 * K + k0 * MR, bp + n0 * K + k0 * NR, NR, kk, acc);
        for (int r = 0; r < MR && m0 + r < M; ++r)
          for (int q = 0; q < NV; ++q) {
            float* cp = c + (m0 + r) * N + n0 + q * L;
            if (k0) {
              V old;
              mk::load(old, cp);
              acc[r][q] += old;
            }
            mk::store(cp, acc[r][q]);
          }
      }
    }
}
INFER_PER_ISA(void, sgemm_blocked, sgemm_blocked_body,
              (const float* a, const float* bp, float* c, int64_t M, int64_t N, int64_t K, int64_t kc),
              (a, bp, c, M, N, K, kc))

template <class F>
double best_seconds(F&& f, double budget = 0.3) {
  double best = 1e30, spent = 0;
  for (int r = 0; r < 50 && (r < 3 || spent < budget); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s), spent += s;
  }
  return best;
}

}  // namespace

int main() {
  struct Gemm {
    const char* what;
    int64_t M, N, K;
  };
  const Gemm shapes[] = {{"1x1 64->256 @56x56", 256, 3136, 64},   {"1x1 256->64 @56x56", 64, 3136, 256},
                         {"3x3 128 @28x28", 128, 784, 1152},      {"1x1 1024->256 @14x14", 256, 196, 1024},
                         {"3x3 256 @14x14", 256, 196, 2304},      {"1x1 2048->512 @7x7", 512, 49, 2048},
                         {"3x3 512 @7x7", 512, 49, 4608}};
  std::mt19937_64 rng(1);
  std::printf("%-8s %-22s %10s %10s %8s %10s %10s %12s\n", "isa", "gemm (M x N x K)", "fp32 GOP/s", "int8 GOP/s",
              "ratio", "u8s8 GOP/s", "vnni GOP/s", "pack_a GB/s");
  for (CpuIsa isa : {CpuIsa::Avx512, CpuIsa::Avx2, CpuIsa::Baseline}) {
    if (isa > cpu_isa_supported()) continue;
    const isa::Shape fs = isa::shape(isa);
    for (const Gemm& g : shapes) {
      const int64_t panel = fs.lanes * fs.nv, NP = (g.N + panel - 1) / panel * panel;
      const int64_t MP = (g.M + fs.mr - 1) / fs.mr * fs.mr;
      std::vector<float> a(size_t(g.M * g.K)), ap(size_t(MP * g.K)), b(size_t(g.K * NP)), c(size_t(MP * NP));
      for (float& v : a) v = float(rng() % 200) / 100.f - 1.f;
      for (float& v : b) v = float(rng() % 200) / 100.f - 1.f;
      mk::pack_a(a.data(), g.M, g.K, g.K, fs.mr, ap.data());
      const auto fp32 = sgemm_for(isa);
      const double tf = best_seconds([&] { fp32(ap.data(), b.data(), c.data(), g.M, NP, g.K); });
      std::vector<float> bp(b.size());  // panels [NP / panel][K][panel]
      for (int64_t j = 0; j < NP / panel; ++j)
        for (int64_t k = 0; k < g.K; ++k)
          for (int64_t q = 0; q < panel; ++q) bp[size_t((j * g.K + k) * panel + q)] = b[size_t(k * NP + j * panel + q)];
      const auto blocked = sgemm_blocked_for(isa);
      double tb[3];
      const int64_t kcs[3] = {128, 256, 512};
      for (int i = 0; i < 3; ++i)
        tb[i] = best_seconds([&] { blocked(ap.data(), bp.data(), c.data(), g.M, NP, g.K, kcs[i]); });

      std::vector<uint8_t> qa(size_t(g.M * g.K));
      std::vector<int8_t> qw(size_t(g.N * g.K));
      for (uint8_t& v : qa) v = uint8_t(rng());
      for (int8_t& v : qw) v = int8_t(rng());
      const qgemm::PackedB qb = qgemm::pack_b(qw.data(), g.N, g.K, g.K, isa);
      std::vector<int32_t> qap(qgemm::packed_a_size(g.M, g.K, isa)), qc(size_t(g.M * g.N));
      const double tp = best_seconds([&] { qgemm::pack_a(qa.data(), g.M, g.K, g.K, 128, isa, qap.data()); });
      const double tq = best_seconds([&] { qgemm::gemm(qap.data(), g.M, qb, qc.data(), g.N); });
      const double ops = 2.0 * g.M * g.N * g.K;
      double t8 = 0, tv = 0;  // the u8s8 form: A row-major uint8 (lda 4 * quads), 7-bit weights; VNNI
      if (isa >= CpuIsa::Avx2) {
        std::vector<int8_t> qw7(qw.size());
        for (int8_t& v : qw7) v = int8_t(int(rng() % 129) - 64);
        const qgemm::PackedB8 qb8 = qgemm::pack_b_u8s8(qw7.data(), g.N, g.K, g.K, 128, isa, /*vnni=*/false);
        const int64_t lda = 4 * qb8.quads;
        std::vector<uint8_t> qa8(size_t(g.M * lda));
        for (uint8_t& v : qa8) v = uint8_t(rng());
        t8 = best_seconds([&] { qgemm::gemm_rows_u8s8(qa8.data(), lda, g.M, qb8, qc.data(), g.N); });
        if (qgemm::has_vnni(isa)) {  // 8-bit weights through vpdpbusd
          const qgemm::PackedB8 qbv = qgemm::pack_b_u8s8(qw.data(), g.N, g.K, g.K, 128, isa, /*vnni=*/true);
          tv = best_seconds([&] { qgemm::gemm_rows_u8s8(qa8.data(), lda, g.M, qbv, qc.data(), g.N); });
        }
      }
      std::printf("%-8s %-22s %10.1f %10.1f %7.2fx %10.1f %10.1f %12.2f   fp32 K-blocked kc 128/256/512: %.1f %.1f %.1f\n",
                  cpu_isa_name(isa), g.what, ops / tf / 1e9, ops / tq / 1e9, tf / tq, t8 > 0 ? ops / t8 / 1e9 : 0.0,
                  tv > 0 ? ops / tv / 1e9 : 0.0, double(g.M * g.K) / tp / 1e9, ops / tb[0] / 1e9, ops / tb[1] / 1e9,
                  ops / tb[2] / 1e9);
    }
  }
  return 0;
}
