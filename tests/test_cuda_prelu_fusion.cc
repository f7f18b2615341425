// The per-channel PRelu epilogue on CUDA (issue 28 must 4, the fuse_prelu pass): every cuda conv2d and
// conv_transpose2d variant that declares KernelVariant::fuses_prelu, run on the fused node (x, weight,
// bias, slope [C_out]) in fp32, tf32 and fp16, NCHW and NHWC, against the unfused pair on the host (the
// cpu reference of the producer without activation, then y < 0 ? slope[c] * y : y), on random shapes
// (odd sizes, edge paddings, 1x1 / 3x3 / 5x5 / 7x7, strides 1-3, groups), slopes of both signs and 0,
// NaN-poisoned outputs (tests/cuda_test_util.h); variants without the flag must refuse the node. And
// sessions: a conv (3x3) + PRelu and a transposed conv + PRelu plan one node on cuda, as computed by
// the reference backend. Skipped when there is no GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "infer/infer.h"
#include "infer/kernel.h"

using namespace infer;
using infer::test::make_case;
using infer::test::OpCase;
using infer::test::scaled;
using infer::test::uniform;

namespace {

// c made into fuse_prelu's form: activation PRelu, a bias (constant zeros of the pass where c had
// none: random here), the slopes [C_out] as input 3; all three constants. Slopes in [-1, 1], the
// second one 0.
OpCase with_prelu(OpCase c) {
  std::visit([](auto& q) {
    if constexpr (requires { q.activation; }) q.activation = Activation{ActivationKind::PRelu, 0.01f, 0.f};
  }, c.params);
  const int64_t C = c.output[1];
  if (c.inputs.size() == 2) c.inputs.push_back({C});
  c.inputs.push_back({C});
  c.constant = {false, true, true, true};
  c.fill = [](std::vector<std::vector<float>>& in) {
    if (in.back().size() > 1) in.back()[1] = 0.f;
  };
  return c;
}

// The unfused pair on the host: the cpu reference of the producer with no activation and no slope
// input, then the per-channel select in float (what the prelu kernels compute), NCHW.
std::vector<float> unfused(const test::CaseData& cd) {
  NodeDesc plain = cd.node;
  std::visit([](auto& q) {
    if constexpr (requires { q.activation; }) q.activation = Activation{};
  }, plain.params);
  plain.input_shapes.pop_back();
  plain.constants.pop_back();
  const std::vector<std::vector<float>> data(cd.data.begin(), cd.data.end() - 1);
  std::vector<float> y = test::run_reference(plain, data);
  const std::vector<float>& slope = cd.data.back();
  const Shape& s = plain.output_shapes[0];
  const int64_t C = s[1], inner = s[2] * s[3];
  for (size_t i = 0; i < y.size(); ++i) {
    const float a = slope[static_cast<size_t>((static_cast<int64_t>(i) / inner) % C)];
    y[i] = y[i] < 0.f ? a * y[i] : y[i];
  }
  return y;
}

// Every cuda variant of c's op in `layout`: those that declare fuses_prelu and apply run the fused node
// (captured into a CUDA graph when `capture`) and must give the unfused pair's values within
// tolerance(p); the others must not apply. Adds "name/layout" of each that ran to `seen`.
void check_fused(const OpCase& c, Precision p, Layout layout, bool capture, std::set<std::string>& seen) {
  const test::CaseData cd = test::make_case_data(c, p);
  const std::vector<float> want = unfused(cd);
  NodeDesc node = cd.node;
  node.layout = layout;
  std::vector<std::vector<float>> inputs = cd.data;
  inputs[0] = test::relayout(inputs[0], node.input_shapes[0], Layout::NCHW, layout);  // constants stay
  for (const KernelVariant* v : test::cuda_variants(op_name(op_type(c.params)))) {
    const std::string what = v->op + "." + v->name + " " + test::precision_label(p) + " " + layout_name(layout) +
                             " " + test::describe(c) + (capture ? " (graph)" : "");
    if (!v->fuses_prelu) {
      CHECK_MESSAGE(!variant_applies(*v, node), what << ": applies without declaring fuses_prelu");
      continue;
    }
    if (!variant_applies(*v, node)) continue;
    test::CudaRun r;
    try {
      r = test::run_cuda(*v, node, inputs, capture);
    } catch (const std::exception& e) {
      FAIL_CHECK(what << ": threw " << e.what());
      continue;
    }
    test::check_run(what, r, test::relayout(r.output, node.output_shapes[0], layout, Layout::NCHW), want,
                    test::tolerance(p));
    seen.insert(v->name + "/" + layout_name(layout));
  }
}

void check_all(const OpCase& c, int t, std::set<std::string> (&seen)[3]) {
  for (size_t pi = 0; pi < 3; ++pi)
    for (Layout layout : {Layout::NCHW, Layout::NHWC})
      check_fused(c, test::kAllPrecisions[pi], layout, (t + int(pi)) % 3 == 0, seen[pi]);
}

// Output size of a convolution along one axis.
int64_t conv_out(int64_t in, int pa, int pb, int64_t k, int s) { return (in + pa + pb - k) / s + 1; }

OpCase conv_case(Conv2DParams p, int64_t N, int64_t CI, int64_t CO, int64_t H, int64_t W, int kh, int kw,
                 uint64_t seed) {
  const Shape y{N, CO, conv_out(H, p.pad.top, p.pad.bottom, kh, p.stride_h),
                conv_out(W, p.pad.left, p.pad.right, kw, p.stride_w)};
  return with_prelu(make_case(p, {{N, CI, H, W}, {CO, CI / p.groups, kh, kw}}, {false, true}, y, seed));
}

// A conv2d node for family t % 7, aimed at the variants named:
//  0: any kernel 1..5 (mostly 3 and 5), strides 1-2, asymmetric edge paddings, odd sizes (direct,
//     im2col_gemm, cudnn where the padding is symmetric);
//  1: channels multiples of 8, 3x3 / 5x5, symmetric padding (cudnn in both layouts, cutlass);
//  2: 1x1, stride 1, no padding (gemm_1x1, gemm_1x1_nhwc, mma_1x1_nhwc, cutlass);
//  3: C_in 1..4, C_out a multiple of 8, 3x3 / 5x5 / 7x7 (mma_small_cin_nhwc);
//  4: C_out 1..8, C_in a multiple of 8 (direct_small_cout, direct_small_cout_nhwc, mma_small_cout_nhwc);
//  5: width-foldable stride-1 layers with C_in or C_out <= 4 (cudnn_folded);
//  6: grouped, depthwise or dilated (direct, cudnn).
OpCase random_conv(std::mt19937_64& rng, int t, uint64_t seed) {
  Conv2DParams p;
  switch (t % 7) {
    case 0: {
      const int k = t % 3 == 0 ? 3 : t % 3 == 1 ? 5 : uniform(rng, 1, 5);
      p.stride_h = p.stride_w = uniform(rng, 1, 2);
      p.pad = {uniform(rng, 0, k - 1), uniform(rng, 0, k - 1), uniform(rng, 0, k - 1), uniform(rng, 0, k - 1)};
      if (t % 2) p.pad.bottom = p.pad.top, p.pad.right = p.pad.left;
      int64_t H, W;
      do {
        H = uniform(rng, 1, 23), W = uniform(rng, 1, 23);
      } while (H + p.pad.top + p.pad.bottom < k || W + p.pad.left + p.pad.right < k);
      return conv_case(p, uniform(rng, 1, 3), uniform(rng, 1, 19), uniform(rng, 1, 37), H, W, k, k, seed);
    }
    case 1: {
      const int k = t % 2 ? 3 : 5;
      p.stride_h = p.stride_w = uniform(rng, 1, 2);
      const int pad = uniform(rng, 0, k / 2);
      p.pad = {pad, pad, pad, pad};
      return conv_case(p, uniform(rng, 1, 4), 8 * uniform(rng, 1, 4), 8 * uniform(rng, 1, 5), uniform(rng, 5, 19),
                       uniform(rng, 5, 21), k, k, seed);
    }
    case 2:
      return conv_case(p, uniform(rng, 1, 4), 8 * uniform(rng, 1, 4), 8 * uniform(rng, 1, 5), uniform(rng, 1, 13),
                       uniform(rng, 1, 15), 1, 1, seed);
    case 3: {
      const int k = 3 + 2 * (t % 3);
      p.stride_h = p.stride_w = uniform(rng, 1, 2);
      p.pad = {uniform(rng, 0, k / 2), uniform(rng, 0, k / 2), uniform(rng, 0, k / 2), uniform(rng, 0, k / 2)};
      return conv_case(p, uniform(rng, 1, 3), uniform(rng, 1, 4), 8 * uniform(rng, 1, 4), uniform(rng, 7, 30),
                       uniform(rng, 7, 40), k, k, seed);
    }
    case 4: {
      const int k = t % 2 ? 3 : 5;
      p.stride_h = p.stride_w = t % 4 < 2 ? 1 : 2;
      p.pad = {uniform(rng, 0, k / 2), uniform(rng, 0, k / 2), uniform(rng, 0, k / 2), uniform(rng, 0, k / 2)};
      return conv_case(p, uniform(rng, 1, 3), 8 * uniform(rng, 1, 4), uniform(rng, 1, 8), uniform(rng, 6, 25),
                       uniform(rng, 6, 70), k, k, seed);
    }
    case 5: {
      // (C_in, C_out, kernel, pad, H, W) of test_cuda_layout.cc's cudnn_folded cases
      struct Geo {
        int64_t ci, co;
        int k, pad;
        int64_t h, w;
      };
      const Geo geos[] = {{3, 64, 3, 1, 9, 16}, {3, 16, 3, 1, 5, 32}, {1, 8, 5, 2, 7, 16}, {64, 3, 3, 1, 6, 16},
                          {32, 1, 3, 1, 3, 8},  {4, 40, 5, 2, 3, 24}, {2, 3, 3, 1, 5, 8}};
      const Geo& g = geos[static_cast<size_t>(t / 7) % 7];
      p.pad = {g.pad, g.pad, g.pad, g.pad};
      return conv_case(p, 2, g.ci, g.co, g.h, g.w, g.k, g.k, seed);
    }
    default: {
      const test::RandomGroupedConv r = test::random_grouped_conv2d_shapes(rng, t % 2 == 0, true);
      OpCase c = make_case(r.p, r.inputs, {false, true, true}, r.y, seed);
      return with_prelu(c);
    }
  }
}

// A conv_transpose2d node for family t % 6: 0 any stride 1-3, groups, dilation, output_padding (gemm_col2im,
// conventional); 1 stride 1 (flipped_conv); 2 stride 2, kernels 1..7 (segregated_*); 3 a 1x1 input
// projected by a 4x4 kernel (projection, batch 1 / 4 / 6: gemv and GEMM); 4 k4 s2 p1 with aligned
// channels (segregated_mma_nhwc, cudnn, cutlass); 5 width-foldable with C_out <= 4 (cudnn_folded).
OpCase random_tconv(std::mt19937_64& rng, int t, uint64_t seed) {
  ConvTranspose2DParams p;
  auto out = [](int64_t in, int s, int pa, int pb, int64_t ek, int op) { return (in - 1) * s - pa - pb + ek + op; };
  auto tconv = [&](int64_t N, int64_t CI, int64_t CO, int64_t H, int64_t W, int k) {
    const Shape y{N, CO, out(H, p.stride_h, p.pad.top, p.pad.bottom, p.dilation_h * (k - 1) + 1, p.output_padding_h),
                  out(W, p.stride_w, p.pad.left, p.pad.right, p.dilation_w * (k - 1) + 1, p.output_padding_w)};
    return with_prelu(make_case(p, {{N, CI, H, W}, {CI, CO / p.groups, k, k}}, {false, true}, y, seed));
  };
  switch (t % 6) {
    case 0:
      for (;;) {
        const test::RandomGroupedTconv r = test::random_grouped_conv_transpose2d_shapes(rng, t);
        p = r.p;
        const Shape& x = r.inputs[0];
        const Shape& w = r.inputs[1];
        p.output_padding_h = std::min(p.output_padding_h, std::max(p.stride_h, p.dilation_h) - 1);
        p.output_padding_w = std::min(p.output_padding_w, std::max(p.stride_w, p.dilation_w) - 1);
        if (w[2] != w[3]) continue;
        const OpCase c = tconv(x[0], x[1], w[1] * p.groups, x[2], x[3], static_cast<int>(w[2]));
        if (c.output[2] >= 1 && c.output[3] >= 1) return c;
      }
    case 1:
    case 2: {
      const int k = t % 4 == 1 ? 3 : uniform(rng, 1, 7);
      p.stride_h = p.stride_w = t % 6 == 1 ? 1 : 2;
      p.pad = {uniform(rng, 0, k - 1), uniform(rng, 0, k - 1), uniform(rng, 0, k - 1), uniform(rng, 0, k - 1)};
      if (t % 4 == 1) p.pad.bottom = p.pad.top, p.pad.right = p.pad.left;
      p.output_padding_h = p.output_padding_w = p.stride_h == 2 ? uniform(rng, 0, 1) : 0;
      for (;;) {
        const OpCase c = tconv(uniform(rng, 1, 3), uniform(rng, 1, 40), uniform(rng, 1, 40), uniform(rng, 1, 11),
                               uniform(rng, 1, 13), k);
        if (c.output[2] >= 1 && c.output[3] >= 1) return c;
      }
    }
    case 3: {
      const int64_t batches[] = {1, 4, 6};
      return tconv(batches[static_cast<size_t>(t / 6) % 3], 8 * uniform(rng, 1, 5), uniform(rng, 1, 40), 1, 1, 4);
    }
    case 4:
      p.stride_h = p.stride_w = 2;
      p.pad = {1, 1, 1, 1};
      return tconv(uniform(rng, 1, 3), 8 * uniform(rng, 1, 4), 64 * uniform(rng, 1, 2), uniform(rng, 1, 19),
                   uniform(rng, 1, 19), 4);
    default: {
      int k, s, pad, op;
      do {
        k = uniform(rng, 1, 5), s = uniform(rng, 1, 3), pad = uniform(rng, 0, k - 1);
        op = s - k + 2 * pad;  // W_out = s W: the fold's condition
      } while (op < 0 || op >= s);
      p.stride_h = p.stride_w = s;
      p.pad = {pad, pad, pad, pad};
      p.output_padding_h = p.output_padding_w = op;
      return tconv(uniform(rng, 1, 3), 8 * uniform(rng, 1, 4), uniform(rng, 1, 4), uniform(rng, 1, 9),
                   8 * uniform(rng, 1, 4), k);
    }
  }
}

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& x : s) out += (out.empty() ? "" : " ") + x;
  return out;
}

// Every name of `want` is in `seen` (missing ones named in the failure).
void check_covered(const std::set<std::string>& seen, std::vector<std::string> want, Precision p) {
  std::string missing;
  for (const std::string& w : want)
    if (!seen.count(w)) missing += " " + w;
  CHECK_MESSAGE(missing.empty(), test::precision_label(p) << ": never ran:" << missing << " (ran: " << joined(seen)
                                                          << ")");
}

#ifdef INFER_WITH_CUTLASS
constexpr bool kCutlass = true;
#else
constexpr bool kCutlass = false;
#endif

}  // namespace

CUDA_TEST_CASE("fused prelu epilogue: every fusing cuda conv2d variant equals conv2d then prelu (fp32, tf32, fp16; NCHW, NHWC)") {
  std::mt19937_64 rng(28401);
  std::set<std::string> seen[3];
  const int cases = std::max(scaled(42), 14);  // every family at least twice
  for (int t = 0; t < cases; ++t) {
    const OpCase c = random_conv(rng, t, 28000 + 13 * static_cast<uint64_t>(t));
    CAPTURE(test::describe(c));
    check_all(c, t, seen);
  }
  for (size_t pi = 0; pi < 3; ++pi) {
    const Precision p = test::kAllPrecisions[pi];
    std::vector<std::string> want = {"direct/nchw",    "direct_small_cout/nchw",      "gemm_1x1/nchw",
                                     "im2col_gemm/nchw", "cudnn/nchw",                "cudnn/nhwc",
                                     "gemm_1x1_nhwc/nhwc", "direct_small_cout_nhwc/nhwc"};
    if (p != Precision::FP32) {
      want.push_back("cudnn_folded/nhwc");
      if (kCutlass) want.push_back("cutlass/nhwc");
    }
    if (p == Precision::FP16)
      for (const char* v : {"mma_small_cin_nhwc/nhwc", "mma_small_cout_nhwc/nhwc", "mma_1x1_nhwc/nhwc"})
        want.push_back(v);
    check_covered(seen[pi], want, p);
  }
}

CUDA_TEST_CASE("fused prelu epilogue: every fusing cuda conv_transpose2d variant equals conv_transpose2d then prelu") {
  std::mt19937_64 rng(28402);
  std::set<std::string> seen[3];
  const int cases = std::max(scaled(36), 12);
  for (int t = 0; t < cases; ++t) {
    const OpCase c = random_tconv(rng, t, 29000 + 11 * static_cast<uint64_t>(t));
    CAPTURE(test::describe(c));
    check_all(c, t, seen);
  }
  for (size_t pi = 0; pi < 3; ++pi) {
    const Precision p = test::kAllPrecisions[pi];
    std::vector<std::string> want = {"flipped_conv/nchw",       "gemm_col2im/nchw", "segregated_gemm/nchw",
                                     "segregated_unified/nchw", "conventional/nchw", "segregated_cublas/nchw",
                                     "projection/nchw",         "projection/nhwc",  "cudnn/nchw",
                                     "cudnn/nhwc"};
    if (p != Precision::FP32) {
      want.push_back("cudnn_folded/nhwc");
      if (kCutlass) want.push_back("cutlass/nhwc");
    }
    if (p == Precision::FP16) want.push_back("segregated_mma_nhwc/nhwc");
    check_covered(seen[pi], want, p);
  }
}

namespace {

std::vector<Tensor> random_inputs(const Session& s, uint64_t seed) {
  std::vector<Tensor> in;
  for (const TensorInfo& t : s.inputs())
    in.emplace_back(t.shape, test::random_vector(static_cast<size_t>(shape_numel(t.shape)), seed++));
  return in;
}

// The pass log line of fuse_prelu.
std::string prelu_line(const Session& s) {
  for (const std::string& line : s.passes())
    if (line.rfind("fuse_prelu", 0) == 0) return line;
  return "";
}

// `producer` (one op) followed by a per-channel PRelu (slopes of both signs and 0), as a model.
Model producer_prelu(OpParams params, const Shape& x, const Shape& w, int64_t C, const char* name) {
  ModelBuilder b(name);
  int v = b.input("x", x);
  v = b.node("conv", std::move(params),
             {v, b.constant("conv.w", w, test::random_vector(static_cast<size_t>(shape_numel(w)), 31)),
              b.constant("conv.b", {C}, test::random_vector(static_cast<size_t>(C), 32))});
  std::vector<float> slope = test::random_vector(static_cast<size_t>(C), 33);
  slope[1] = 0.f;
  v = b.node("p", PReluParams{}, {v, b.constant("p.slope", {C}, slope)});
  b.output(v);
  return Model::from_bytes(b.finish(), name);
}

// On cuda at every precision and batch 1 and 8 the PRelu is fused (no prelu node; the producer's
// `fused` names it; at batch 1 ONE node besides the layout conversions an NHWC producer would plan:
// cuDNN's NHWC kernel takes heavy fp16 convolutions at batch 1 too), and the output is the reference backend's
// within the precision's tolerance; with fuse_prelu off it stays a node.
void check_session(const Model& m, const std::string& op) {
  for (int64_t batch : {1, 8}) {
    SessionOptions ro;
    ro.backend = "reference";
    ro.batch = batch;
    Session ref(m, ro);
    const std::vector<Tensor> in = random_inputs(ref, 40 + static_cast<uint64_t>(batch));
    const std::vector<float> want = ref.run(in)[0].data;
    for (Precision p : test::kAllPrecisions) {
      CAPTURE(batch);
      CAPTURE(test::precision_label(p));
      SessionOptions o;
      o.backend = "cuda";
      o.batch = batch;
      o.precision = p;
      Session s(m, o);
      CHECK(prelu_line(s) == "fuse_prelu: 1 per-channel PRelu node fused into " + op);
      int producers = 0, prelus = 0;
      for (const NodeInfo& n : s.nodes()) {
        CAPTURE(n.variant);
        if (n.op == op) {
          ++producers;
          CHECK(n.fused == std::vector<std::string>{"p"});
        }
        prelus += n.op == "prelu";
      }
      CHECK(producers == 1);
      CHECK(prelus == 0);
      if (batch == 1)
        CHECK(std::count_if(s.nodes().begin(), s.nodes().end(), [](const NodeInfo& n) { return n.op != "layout"; }) == 1);
      const std::vector<float> got = s.run(in)[0].data;
      CHECK(infer::test::all_finite(got));
      CHECK(infer::test::rel_error(got, want) <= test::tolerance(p));
      SessionOptions off = o;
      off.passes.fuse_prelu = false;
      Session plain(m, off);
      int plain_prelus = 0;
      for (const NodeInfo& n : plain.nodes()) plain_prelus += n.op == "prelu";
      CHECK(plain_prelus == 1);
      CHECK(infer::test::rel_error(plain.run(in)[0].data, want) <= test::tolerance(p));
    }
  }
}

}  // namespace

CUDA_TEST_CASE("fuse_prelu on cuda: a 3x3 conv2d + per-channel PRelu (SRGAN's block) plans one node") {
  Conv2DParams cp;
  cp.pad = {1, 1, 1, 1};
  check_session(producer_prelu(cp, {-1, 16, 17, 19}, {32, 16, 3, 3}, 32, "conv_prelu"), "conv2d");
}

CUDA_TEST_CASE("fuse_prelu on cuda: a 4x4 stride-2 conv_transpose2d + per-channel PRelu plans one node") {
  ConvTranspose2DParams tp;
  tp.stride_h = tp.stride_w = 2;
  tp.pad = {1, 1, 1, 1};
  check_session(producer_prelu(tp, {-1, 32, 9, 11}, {32, 16, 4, 4}, 16, "tconv_prelu"), "conv_transpose2d");
}
