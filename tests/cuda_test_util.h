// The CUDA kernel test harness: runs one registered cuda variant the way the session does (prepare()
// once from float32 host constants; every input, constants included, uploaded in the precision's
// storage type; NaN-poisoned output and workspace; one KernelCall on the test binary's one
// cuda::Context; optionally captured into a CUDA graph and replayed twice) and compares it with the
// cpu "reference" variant run on the host on the same (for fp16: half-rounded) inputs. Also guards:
// bytes past the output and past the declared workspace, and every input, must be left untouched.
// Skipping: CUDA_TEST_CASE skips every test and prints one line when the machine has no CUDA device.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "infer/error.h"
#include "kernels/cuda/context.h"
#include "infer/kernel.h"
#include "test_util.h"

namespace infer::test {

// ---- skipping -----------------------------------------------------------------------------------

// True when no CUDA device is usable. The first call (from the first CUDA_TEST_CASE's registration,
// before main) prints the one line ctest's SKIP_REGULAR_EXPRESSION matches, so the binary reports
// itself skipped; doctest then skips every test case and exits 0.
inline bool no_cuda_device() {
  static const bool none = [] {
    const bool missing = !cuda::device_available();
    if (missing) {
      std::printf("CUDA tests skipped: no CUDA device\n");
      std::fflush(stdout);
    }
    return missing;
  }();
  return none;
}

}  // namespace infer::test

// A doctest TEST_CASE that is skipped when there is no CUDA device. Every test of a CUDA test binary
// uses it (a plain TEST_CASE would try to create a CUDA context on a machine without one).
#define CUDA_TEST_CASE(name) TEST_CASE(name * doctest::skip(::infer::test::no_cuda_device()))

namespace infer::test {

// ---- scale and tolerances -----------------------------------------------------------------------

// INFER_TEST_QUICK=1 (e.g. under compute-sanitizer, which slows every launch ~100x) runs a tenth of
// the random cases (at least 5) and leaves out the largest fixed shapes.
inline bool quick_mode() {
  const char* q = std::getenv("INFER_TEST_QUICK");
  return q && *q && std::strcmp(q, "0") != 0;
}
inline int scaled(int n) { return quick_mode() ? (n / 10 > 5 ? n / 10 : (n < 5 ? n : 5)) : n; }

// docs/design.md "Measuring": ||out - ref|| / ||ref|| <= 1e-5 in fp32, 1e-2 in fp16; TF32 rounds GEMM
// inputs to a 10-bit mantissa (unit roundoff 2^-11), so 5e-3.
inline double tolerance(Precision p) {
  switch (p) {
    case Precision::FP32: return 1e-5;
    case Precision::TF32: return 5e-3;
    case Precision::FP16: return 1e-2;
  }
  return 0;
}

inline const Precision kAllPrecisions[] = {Precision::FP32, Precision::TF32, Precision::FP16};

// ---- storage conversions ------------------------------------------------------------------------

inline float round_to_half(float x) { return __half2float(__float2half_rn(x)); }

// Under FP16 every stored value is a half: the reference must see the same rounded inputs.
inline void round_to_storage(std::vector<float>& v, Precision p) {
  if (p == Precision::FP16)
    for (float& x : v) x = round_to_half(x);
}

// The one CUDA context of the test binary (stream + cuBLAS handles), created on first use.
inline cuda::Context& test_context() {
  static cuda::ContextOwner owner;
  return owner.get();
}

// Bytes after the output and after the workspace that must still hold the poison after a run.
constexpr size_t kGuardBytes = 1024;

// Device copy of `host` in p's storage type (half via __float2half_rn on the host, as the session's
// uploads do), plus `extra` bytes after it poisoned with 0xFF.
inline std::unique_ptr<cuda::DeviceArray> to_device(const std::vector<float>& host, Precision p,
                                                    size_t extra = 0) {
  const size_t bytes = host.size() * cuda::element_size(p);
  auto arr = std::make_unique<cuda::DeviceArray>(bytes + extra);
  if (bytes + extra) INFER_CUDA_CHECK(cudaMemset(arr->data(), 0xFF, bytes + extra));
  if (host.empty()) return arr;
  if (p == Precision::FP16) {
    std::vector<__half> h(host.size());
    for (size_t i = 0; i < host.size(); ++i) h[i] = __float2half_rn(host[i]);
    INFER_CUDA_CHECK(cudaMemcpy(arr->data(), h.data(), bytes, cudaMemcpyHostToDevice));
  } else {
    INFER_CUDA_CHECK(cudaMemcpy(arr->data(), host.data(), bytes, cudaMemcpyHostToDevice));
  }
  return arr;
}

// `count` stored elements at `device` as float32 on the host (half -> float).
inline std::vector<float> download(const void* device, size_t count, Precision p) {
  std::vector<float> out(count);
  if (!count) return out;
  if (p == Precision::FP16) {
    std::vector<__half> h(count);
    INFER_CUDA_CHECK(cudaMemcpy(h.data(), device, count * sizeof(__half), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) out[i] = __half2float(h[i]);
  } else {
    INFER_CUDA_CHECK(cudaMemcpy(out.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
  }
  return out;
}

inline std::vector<uint8_t> download_bytes(const void* device, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  if (bytes) INFER_CUDA_CHECK(cudaMemcpy(out.data(), device, bytes, cudaMemcpyDeviceToHost));
  return out;
}

inline bool all_poison(const std::vector<uint8_t>& bytes) {
  for (uint8_t b : bytes)
    if (b != 0xFF) return false;
  return true;
}

// ---- running one variant ------------------------------------------------------------------------

struct CudaRun {
  std::vector<float> output;         // float32 view of the stored output
  size_t workspace_bytes = 0;        // what the variant declared for this node
  bool output_guard_intact = true;   // nothing written past the output
  bool workspace_guard_intact = true;  // nothing written past the declared workspace
  bool inputs_intact = true;         // no input (activation or constant) modified
  bool replay_identical = true;      // captured: a second replay (output re-poisoned) is bit-identical
};

// Runs `v` on `node` (node.precision says the storage type; node.constants holds the float32 host
// data of the constant inputs) with `inputs` (host float32, already rounded for fp16), as the
// session does. With `capture`, the run is recorded into a CUDA graph on the context's stream
// (global capture mode: any synchronizing or allocating call inside run() fails the capture) and the
// graph is launched twice, the output re-poisoned in between.
inline CudaRun run_cuda(const KernelVariant& v, const NodeDesc& node,
                        const std::vector<std::vector<float>>& inputs, bool capture = false) {
  cuda::Context& ctx = test_context();
  const Precision p = node.precision;
  const size_t elem = cuda::element_size(p);
  CudaRun result;

  std::shared_ptr<void> prepared = v.prepare ? v.prepare(node) : nullptr;
  result.workspace_bytes = v.workspace_bytes ? v.workspace_bytes(node) : 0;

  std::vector<std::unique_ptr<cuda::DeviceArray>> in_dev;
  std::vector<std::vector<uint8_t>> in_before;
  for (const auto& in : inputs) {
    in_dev.push_back(to_device(in, p));
    in_before.push_back(download_bytes(in_dev.back()->data(), in.size() * elem));
  }
  const size_t out_count = static_cast<size_t>(shape_numel(node.output_shapes.at(0)));
  const size_t out_bytes = out_count * elem;
  auto out_dev = std::make_unique<cuda::DeviceArray>(out_bytes + kGuardBytes);
  auto ws_dev = std::make_unique<cuda::DeviceArray>(result.workspace_bytes + kGuardBytes);
  INFER_CUDA_CHECK(cudaMemset(out_dev->data(), 0xFF, out_bytes + kGuardBytes));
  INFER_CUDA_CHECK(cudaMemset(ws_dev->data(), 0xFF, result.workspace_bytes + kGuardBytes));
  // cudaMemset/cudaMemcpy run on the legacy stream, which the context's non-blocking stream does not
  // wait for: finish the set-up before the kernel is issued.
  INFER_CUDA_CHECK(cudaDeviceSynchronize());

  KernelCall call{node, {}, {static_cast<float*>(out_dev->data())},
                  result.workspace_bytes ? ws_dev->data() : nullptr, prepared.get(), &ctx};
  for (const auto& d : in_dev) call.inputs.push_back(static_cast<const float*>(d->data()));

  if (!capture) {
    v.run(call);
    INFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    INFER_CUDA_CHECK(cudaGetLastError());
    result.output = download(out_dev->data(), out_count, p);
  } else {
    cudaGraph_t graph = nullptr;
    INFER_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal));
    try {
      v.run(call);
    } catch (...) {
      cudaStreamEndCapture(ctx.stream, &graph);
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    INFER_CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    INFER_CUDA_CHECK(inst);
    try {
      INFER_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
      INFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
      result.output = download(out_dev->data(), out_count, p);
      INFER_CUDA_CHECK(cudaMemsetAsync(out_dev->data(), 0xFF, out_bytes, ctx.stream));
      INFER_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
      INFER_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
      const std::vector<float> again = download(out_dev->data(), out_count, p);
      result.replay_identical =
          again.size() == result.output.size() &&
          std::memcmp(again.data(), result.output.data(), again.size() * sizeof(float)) == 0;
    } catch (...) {
      cudaGraphExecDestroy(exec);
      throw;
    }
    cudaGraphExecDestroy(exec);
  }

  result.output_guard_intact =
      all_poison(download_bytes(static_cast<uint8_t*>(out_dev->data()) + out_bytes, kGuardBytes));
  result.workspace_guard_intact = all_poison(download_bytes(
      static_cast<uint8_t*>(ws_dev->data()) + result.workspace_bytes, kGuardBytes));
  for (size_t i = 0; i < in_dev.size(); ++i)
    if (download_bytes(in_dev[i]->data(), in_before[i].size()) != in_before[i])
      result.inputs_intact = false;
  return result;
}

// The cpu "reference" variant of node's op on the host.
inline std::vector<float> run_reference(const NodeDesc& node,
                                        const std::vector<std::vector<float>>& inputs) {
  const std::string op = op_name(op_type(node.params));
  const KernelVariant* ref = KernelRegistry::global().find("cpu", op, "reference");
  REQUIRE_MESSAGE(ref != nullptr, "no cpu reference variant for " << op);
  std::vector<float> out(static_cast<size_t>(shape_numel(node.output_shapes.at(0))));
  poison(out);
  KernelCall call{node, {}, {out.data()}};
  for (const auto& in : inputs) call.inputs.push_back(in.data());
  ref->run(call);
  return out;
}

// ---- cases --------------------------------------------------------------------------------------

// One node to test: parameters, shapes, which inputs are constants (weights, bias, BN parameters:
// the session hands those to prepare() as float32 host data), and how to fill the inputs.
struct OpCase {
  OpParams params;
  std::vector<Shape> inputs;
  std::vector<bool> constant;  // per input; missing entries are activations
  Shape output;
  uint64_t seed = 1;
  // Adjusts the random inputs before rounding (e.g. positive variances); may be empty.
  std::function<void(std::vector<std::vector<float>>&)> fill;
};

inline OpCase make_case(OpParams params, std::vector<Shape> inputs, std::vector<bool> constant,
                        Shape output, uint64_t seed) {
  OpCase c;
  c.params = std::move(params);
  c.inputs = std::move(inputs);
  c.constant = std::move(constant);
  c.output = std::move(output);
  c.seed = seed;
  return c;
}

// A conv2d case made into fuse_conv_residual's form: inputs x, weight, bias (a constant one added if
// it had none), r (an activation of the output's shape), y = act(conv + bias + r).
inline OpCase with_residual(OpCase c) {
  std::get<Conv2DParams>(c.params).add_residual = true;
  c.constant.resize(4, false);
  c.constant[1] = c.constant[2] = true;
  if (c.inputs.size() == 2) c.inputs.push_back({c.inputs[1][0]});
  c.inputs.push_back(c.output);
  return c;
}

inline std::string pad_str(const Padding2D& p) {
  return "pad " + std::to_string(p.top) + "," + std::to_string(p.left) + "," +
         std::to_string(p.bottom) + "," + std::to_string(p.right);
}

// The parameters that matter for finding a failing case again, e.g. "s 2x2 pad 1,0,1,1 op 1,0 relu".
inline std::string params_str(const OpParams& params) {
  auto stride = [](int h, int w) { return "s " + std::to_string(h) + "x" + std::to_string(w); };
  const std::string act = activation_name(fused_activation(params).kind);
  if (const auto* p = std::get_if<Conv2DParams>(&params))
    return stride(p->stride_h, p->stride_w) + " " + pad_str(p->pad) + " " + act;
  if (const auto* p = std::get_if<ConvTranspose2DParams>(&params))
    return stride(p->stride_h, p->stride_w) + " " + pad_str(p->pad) + " op " +
           std::to_string(p->output_padding_h) + "," + std::to_string(p->output_padding_w) + " g " +
           std::to_string(p->groups) + " d " + std::to_string(p->dilation_h) + "x" +
           std::to_string(p->dilation_w) + " " + act;
  if (const auto* p = std::get_if<ConvPool2DParams>(&params))
    return stride(p->conv.stride_h, p->conv.stride_w) + " " + pad_str(p->conv.pad) + " pool " +
           std::to_string(p->pool) + " " + activation_name(p->conv.activation.kind);
  if (const auto* p = std::get_if<Pool2DParams>(&params))
    return std::string(p->kind == PoolKind::Max ? "max" : "avg") + " k " + std::to_string(p->kernel_h) +
           "x" + std::to_string(p->kernel_w) + " " + stride(p->stride_h, p->stride_w) + " " +
           pad_str(p->pad) + (p->count_include_pad ? " count_include_pad" : "");
  if (const auto* p = std::get_if<SoftmaxParams>(&params)) return "axis " + std::to_string(p->axis);
  if (const auto* p = std::get_if<ConcatParams>(&params)) return "axis " + std::to_string(p->axis);
  if (const auto* p = std::get_if<FlattenParams>(&params)) return "axis " + std::to_string(p->axis);
  if (const auto* p = std::get_if<ActivationParams>(&params))
    return activation_name(p->activation.kind);
  return act;
}

inline std::string describe(const OpCase& c) {
  std::string s = op_name(op_type(c.params));
  s += " ";
  for (const Shape& in : c.inputs) s += shape_str(in) + " ";
  return s + "-> " + shape_str(c.output) + " (" + params_str(c.params) + ")";
}

inline const char* precision_label(Precision p) {
  return p == Precision::FP16 ? "fp16" : p == Precision::TF32 ? "tf32" : "fp32";
}

// The registered cuda variants of `op`, highest priority first.
inline std::vector<const KernelVariant*> cuda_variants(const std::string& op) {
  return KernelRegistry::global().variants("cuda", op);
}

// Fails the test unless every name in `names` is a registered cuda variant of `op`.
inline void require_registered(const std::string& op, const std::vector<std::string>& names) {
  for (const std::string& name : names)
    REQUIRE_MESSAGE(KernelRegistry::global().find("cuda", op, name) != nullptr,
                    "cuda variant " << op << "." << name << " is not registered");
}

// A case made concrete for one precision: its random inputs (rounded to half under FP16) and the
// NodeDesc the session would build (constants point into `data`, so a CaseData moves, never copies).
struct CaseData {
  std::vector<std::vector<float>> data;
  NodeDesc node;
  CaseData() = default;
  CaseData(CaseData&&) = default;
  CaseData& operator=(CaseData&&) = default;
  CaseData(const CaseData&) = delete;
  CaseData& operator=(const CaseData&) = delete;
};

inline CaseData make_case_data(const OpCase& c, Precision p) {
  CaseData cd;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    cd.data.push_back(
        random_vector(static_cast<size_t>(shape_numel(c.inputs[i])), c.seed + 7919 * i));
  if (c.fill) c.fill(cd.data);
  for (auto& d : cd.data) round_to_storage(d, p);
  cd.node.params = c.params;
  cd.node.input_shapes = c.inputs;
  cd.node.output_shapes = {c.output};
  cd.node.precision = p;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    cd.node.constants.push_back(i < c.constant.size() && c.constant[i] ? cd.data[i].data() : nullptr);
  return cd;
}

// The checks every run of a variant passes: `output` (the run's output in NCHW order) within `tol` of
// the reference (NaN, from an unwritten poisoned element, fails), guards intact, inputs unchanged,
// graph replays identical. `what` names the run in failure messages.
inline void check_run(const std::string& what, const CudaRun& r, const std::vector<float>& output,
                      const std::vector<float>& ref, double tol) {
  const double err = rel_error(output, ref);
  CHECK_MESSAGE(err <= tol, what << ": relative error " << err << " > " << tol);
  CHECK_MESSAGE(r.output_guard_intact, what << ": wrote past the end of its output");
  CHECK_MESSAGE(r.workspace_guard_intact,
                what << ": wrote past its declared workspace of " << r.workspace_bytes << " bytes");
  CHECK_MESSAGE(r.inputs_intact, what << ": modified an input");
  CHECK_MESSAGE(r.replay_identical, what << ": a second graph replay gave different bits");
}

// A random grouped / depthwise / dilated conv2d case (test_util.h, with the NHWC vector channel
// counts). Shared by test_cuda_kernels.cc and test_cuda_layout.cc.
inline OpCase random_grouped_conv2d(std::mt19937_64& rng, bool depthwise, uint64_t seed) {
  const RandomGroupedConv r = random_grouped_conv2d_shapes(rng, depthwise, /*vector_channels=*/true);
  return make_case(r.p, r.inputs, {false, true, true}, r.y, seed);
}

// Runs every registered cuda variant of c's op that is applicable (restricted to `only` when it is
// not empty) in precision p and checks it against the reference: relative error within
// tolerance(p) (NaN, from an unwritten poisoned element, fails), guards intact, inputs unchanged,
// replays identical. `extra_context` is added to failure messages. Returns the names that ran.
inline std::vector<std::string> check_case(const OpCase& c, Precision p,
                                           const std::vector<std::string>& only = {},
                                           bool capture = false,
                                           const std::string& extra_context = "") {
  const CaseData cd = make_case_data(c, p);
  const NodeDesc& node = cd.node;
  const auto& data = cd.data;

  const std::vector<float> ref = run_reference(node, data);
  const double tol = tolerance(p);
  std::vector<std::string> ran;
  for (const KernelVariant* v : cuda_variants(op_name(op_type(c.params)))) {
    if (!only.empty() && std::find(only.begin(), only.end(), v->name) == only.end()) continue;
    if (!variant_applies(*v, node)) continue;
    const std::string what = v->op + "." + v->name + " " + precision_label(p) + " " + describe(c) +
                             (capture ? " (graph)" : "") +
                             (extra_context.empty() ? "" : " " + extra_context);
    CudaRun r;
    try {
      r = run_cuda(*v, node, data, capture);
    } catch (const std::exception& e) {
      FAIL_CHECK(what << ": threw " << e.what());
      continue;
    }
    check_run(what, r, r.output, ref, tol);
    ran.push_back(v->name);
  }
  return ran;
}

// Tally of how many cases each variant ran on.
struct Coverage {
  std::vector<std::pair<std::string, int>> counts;
  void add(const std::vector<std::string>& names) {
    for (const std::string& n : names) {
      bool found = false;
      for (auto& c : counts)
        if (c.first == n) ++c.second, found = true;
      if (!found) counts.push_back({n, 1});
    }
  }
  int of(const std::string& name) const {
    for (const auto& c : counts)
      if (c.first == name) return c.second;
    return 0;
  }
};

// ---- layouts ------------------------------------------------------------------------------------

// [N,C,H,W] values from `from`'s memory order into `to`'s, on the host.
inline std::vector<float> relayout(const std::vector<float>& v, const Shape& s, Layout from, Layout to) {
  if (from == to || s.size() != 4) return v;
  std::vector<float> out(v.size());
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const int64_t nchw = ((n * C + c) * H + h) * W + w, nhwc = ((n * H + h) * W + w) * C + c;
          out[static_cast<size_t>(to == Layout::NHWC ? nhwc : nchw)] =
              v[static_cast<size_t>(from == Layout::NHWC ? nhwc : nchw)];
        }
  return out;
}

// check_case for variants that run in `layout`: the node says NHWC, every 4-D activation input is
// handed over in NHWC order and the output read back from it; the reference runs the same values in
// NCHW. Constants stay as the session gives them (float32 host data in the file's order).
inline std::vector<std::string> check_case_in_layout(const OpCase& c, Precision p, Layout layout,
                                                     const std::vector<std::string>& only = {},
                                                     bool capture = false) {
  CaseData cd = make_case_data(c, p);
  const std::vector<float> ref = run_reference(cd.node, cd.data);
  NodeDesc node = cd.node;
  node.layout = layout;
  std::vector<std::vector<float>> inputs = cd.data;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!node.constants[i]) inputs[i] = relayout(inputs[i], node.input_shapes[i], Layout::NCHW, layout);
  const double tol = tolerance(p);
  std::vector<std::string> ran;
  for (const KernelVariant* v : cuda_variants(op_name(op_type(c.params)))) {
    if (!only.empty() && std::find(only.begin(), only.end(), v->name) == only.end()) continue;
    if (!variant_applies(*v, node)) continue;
    const std::string what = v->op + "." + v->name + " " + precision_label(p) + " " +
                             layout_name(layout) + " " + describe(c) + (capture ? " (graph)" : "");
    CudaRun r;
    try {
      r = run_cuda(*v, node, inputs, capture);
    } catch (const std::exception& e) {
      FAIL_CHECK(what << ": threw " << e.what());
      continue;
    }
    check_run(what, r, relayout(r.output, node.output_shapes[0], layout, Layout::NCHW), ref, tol);
    ran.push_back(v->name);
  }
  return ran;
}

// ---- bad calls ----------------------------------------------------------------------------------

// Checks that malformed calls of every cuda variant of `good.params`' op that applies to `good` are
// infer::Errors (never a crash or a launch reading garbage): no inputs, parameters of another op, no
// CUDA context, no prepared state (variants with prepare()), no workspace (variants that declare one).
// `good` is a valid node with its float32 host constants. Returns how many variants were checked.
inline int check_bad_calls(const NodeDesc& good) {
  int checked = 0;
  const std::string op = op_name(op_type(good.params));
  NodeDesc wrong_op = good;
  wrong_op.params = op_type(good.params) == OpType::Activation ? OpParams{AddParams{}}
                                                                : OpParams{ActivationParams{}};
  for (const KernelVariant* v : cuda_variants(op)) {
    if (!variant_applies(*v, good)) continue;
    CAPTURE(v->name);
    ++checked;
    std::shared_ptr<void> prepared = v->prepare ? v->prepare(good) : nullptr;
    const size_t ws = v->workspace_bytes ? v->workspace_bytes(good) : 0;
    cuda::DeviceArray out(static_cast<size_t>(shape_numel(good.output_shapes.at(0))) * 4 + 256);
    cuda::DeviceArray workspace(ws + 256);
    std::vector<std::unique_ptr<cuda::DeviceArray>> in;
    KernelCall ok{good, {}, {static_cast<float*>(out.data())}, workspace.data(), prepared.get(),
                  &test_context()};
    for (const Shape& s : good.input_shapes) {
      in.push_back(std::make_unique<cuda::DeviceArray>(static_cast<size_t>(shape_numel(s)) * 4 + 256));
      ok.inputs.push_back(static_cast<const float*>(in.back()->data()));
    }
    KernelCall no_inputs = ok;
    no_inputs.inputs.clear();
    CHECK_THROWS_AS(v->run(no_inputs), Error);
    KernelCall other_op{wrong_op, ok.inputs, ok.outputs, ok.workspace, prepared.get(), ok.context};
    CHECK_THROWS_AS(v->run(other_op), Error);
    KernelCall no_context = ok;
    no_context.context = nullptr;
    CHECK_THROWS_AS(v->run(no_context), Error);
    if (v->prepare) {
      KernelCall unprepared = ok;
      unprepared.prepared = nullptr;
      CHECK_THROWS_AS(v->run(unprepared), Error);
    }
    if (ws) {
      KernelCall no_workspace = ok;
      no_workspace.workspace = nullptr;
      CHECK_THROWS_AS(v->run(no_workspace), Error);
    }
    INFER_CUDA_CHECK(cudaStreamSynchronize(test_context().stream));
  }
  return checked;
}

}  // namespace infer::test
