// infer::Session: a model bound to a backend and a batch size. Creation does all the work that does not
// depend on input values (graph passes, shape inference, kernel selection, memory planning, weight
// preparation); run() then only executes.
//
// Batch: the batch follows the input, as with ONNX Runtime's dynamic axes. A session is planned at one
// batch (SessionOptions::batch; by default the model's own), and run(), profile() and benchmark() take
// inputs of another leading size too: the session plans itself once more for that batch (passes,
// kernels, memory plan, arena; on cuda weight copies and a CUDA graph of its own), keeps that plan for
// the next input of the same batch, and runs it. A model built or exported at a fixed batch (no
// leading -1) runs at any batch its graph allows, which is any batch unless its `batch.fixed` metadata
// says why its producer kept the batch fixed; the Error then says so in one line.
//
// Thread safety: a Session is used by one thread at a time (run(), profile() and benchmark() change its
// arena and, on cuda, its stream); calls from several threads at once need the caller's own lock.
// Different Sessions may run at the same time on different threads, also when they were made from one
// shared Model (each keeps its own copy of the graph, its own arena and, on cuda, its own stream and
// CUDA graph); their outputs are bit-identical to running them one after the other
// (tests/test_concurrency.cc, tests/test_cuda_concurrency.cc, `make test-tsan`). Creating Sessions
// concurrently is safe. A Session may be moved to, and used from, another thread, and may outlive the
// Model it was made from.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "infer/cpu_isa.h"
#include "infer/model.h"
#include "infer/profile.h"
#include "infer/tensor.h"

namespace infer {

// Graph passes run on the session's copy of the graph before shape inference (engine/src/passes.h,
// docs/kernels.md "Graph passes"), in this order; each can be switched off. What they did is listed
// by Session::passes() and Profile::passes.
struct PassOptions {
  bool fold_batchnorm = true;     // BatchNorm after conv2d / conv_transpose2d / dense -> weights + bias
  bool fuse_conv_avgpool = true;  // conv2d -> p x p average pool at stride p -> conv_pool2d
  bool fuse_activation = true;    // activation node -> its producer's fused epilogue
  // Backend passes, run after shape inference when the backend and precision allow them:
  // channels_last (cuda in fp16 / tf32, cpu): keep 4-D activations NHWC where a faster kernel runs in
  // NHWC, with layout conversion nodes only where the layout changes (inputs and outputs stay NCHW);
  // fold_width (cuda): convolutions with C_in <= 4 may run width-folded (kernel variants that
  // require it are offered only when it is on).
  bool channels_last = true;
  bool fold_width = true;
  // fuse_conv_residual (cpu, cuda): a conv2d whose only reader is an add (or binary add) of an equally
  // shaped activation takes that activation as a residual input, added in its GEMM or epilogue
  // (y = act(conv + r)), where one of the backend's conv2d variants takes it. Listed last in the pass
  // log (it runs before channels_last) so earlier lines keep their positions.
  bool fuse_conv_residual = true;
  // fuse_squeeze_excite (cpu, cuda): global average pool -> 1x1 conv -> 1x1 conv -> multiply with the
  // pool's input (a squeeze-excitation block) becomes one squeeze_excite node. Logged after
  // fuse_conv_residual.
  bool fuse_squeeze_excite = true;
  // fuse_prelu (every backend): a PRelu with per-channel slopes after a conv2d, conv_transpose2d or
  // dense becomes that node's epilogue (the slope one more constant input) where one of the backend's
  // variants for the merged node applies it (KernelVariant::fuses_prelu); elsewhere it stays a node.
  // (A PRelu with one slope is fuse_activation's: a LeakyRelu epilogue.) Logged last.
  bool fuse_prelu = true;
  // fuse_depthwise_pointwise (cpu only, after channels_last): a depthwise conv2d (3x3 / 5x5, stride 1
  // or 2) whose only reader is a 1x1 stride-1 conv2d with no more output channels (MobileNet's
  // projection, with its residual) becomes one depthwise_pointwise node, the depthwise result kept in
  // a per-thread tile, where a cpu variant runs it (NHWC). Logged after fuse_prelu, on cpu only
  // (other backends have no kernel for it and log nothing).
  bool fuse_depthwise_pointwise = true;
  // fuse_quantized_conv2d (cpu only, before channels_last): a QDQ model's conv2d (its input through a
  // per-tensor quantize_linear -> dequantize_linear pair, its weight int8 dequantized at load) runs in
  // integers as one quantized_conv2d node (docs/quantization.md). Off: the pair and the float conv run
  // as written (fake quantization). Logged after fuse_prelu, on cpu, for models with quantize_linear.
  bool fuse_quantized_conv2d = true;
  // fuse_input_epilogue (cuda only, after channels_last): a conv_transpose2d or conv2d whose only reader
  // is a conv2d hands its bias and activation to that reader, which applies them as it loads its input
  // (Conv2DParams::input_epilogue), where the reader's own default variant runs that form; the
  // producer then writes its raw sums (no pass over its output for the epilogue). Logged after
  // fuse_prelu, on cuda only.
  bool fuse_input_epilogue = true;
  // quantized_activations (cpu only, after channels_last): a tensor between two quantized_conv2d nodes
  // (written by one, read only by such nodes with one quantization) stays 8-bit: the producer writes
  // quantize_linear of its result, its readers take the bytes; the same values, a quarter of the
  // memory traffic, no requantization in the readers (docs/quantization.md). Logged after
  // fuse_depthwise_pointwise, on cpu, for models where fuse_quantized_conv2d made a node.
  bool quantized_activations = true;
  // fuse_quantized_add (cpu only, after fuse_quantized_conv2d): an add reading quantize_linear ->
  // dequantize_linear pairs (ONNX Runtime's QDQ residual adds) reads their inputs and applies the pairs
  // itself, element by element: the same values, no Q / DQ passes over the tensors. Logged after
  // fuse_quantized_conv2d, on cpu, for models with quantize_linear.
  bool fuse_quantized_add = true;

  static const std::vector<std::string>& names();  // "fold_batchnorm", "fuse_conv_avgpool", ...
  // Switches one pass by name; an unknown name is an Error listing the known ones.
  void set(const std::string& name, bool on);
  void set_all(bool on);
  // "NAME=on" or "NAME=off" (the CLIs' --pass); an Error for any other text or an unknown name.
  void apply(const std::string& choice);
  bool enabled(const std::string& name) const;  // false for an unknown name
};

// True when this build has the CUDA backend and a CUDA device is present: what backend "auto" picks
// cuda by.
bool cuda_available();

struct SessionOptions {
  // "cpu", "cuda", "reference" (cpu with reference kernels only), or "auto" (cuda when this build has
  // the CUDA backend and a GPU is present, else cpu).
  std::string backend = "auto";
  // The batch the session is planned at: it replaces the leading -1 of every activation (or a fixed
  // model's leading size). 0: the model's own (its inputs' fixed leading size when none has a -1, else
  // 1). Inputs of another batch are planned for when they come (see the top of this file).
  int64_t batch = 0;
  // fp32 (strict), tf32 or fp16 (infer/ops.h); anything but fp32 needs the cuda backend.
  Precision precision = Precision::FP32;
  // Choose each node's variant by timing at creation instead of the default heuristic: every
  // applicable variant of a node timed alone proposes, and a change is kept only when the whole
  // forward (replayed as it runs) gets faster, so the plan is never slower than the default as
  // measured. Forced variants (`kernels`) are kept as forced. Session::passes() reports the timings.
  bool autotune = false;
  // A JSON file of autotuned plans (TensorRT's timing cache, for a whole plan): when it holds the
  // plan of this graph on this device, precision, batch and CPU level, the session uses it and times
  // nothing; otherwise an autotuned session adds its plan to it (the file is created, or rewritten
  // through a temporary file). A file that is not a plan cache is an Error and is never overwritten.
  // Empty: no cache.
  std::string plan_cache;
  // Forced kernel variants, op name -> variant name (e.g. {"conv_transpose2d", "reference"}), or for
  // one node "op:node name" -> variant (e.g. {"conv2d:conv1_1", "cudnn_folded"}; it wins over the op's).
  // An unknown op or variant, a node name the graph lacks, or a variant not applicable to a node it
  // is forced on, is an Error.
  std::map<std::string, std::string> kernels;
  PassOptions passes;  // all on by default
  // Intermediate activations to read back, by value name (e.g. a hidden layer as a feature
  // extractor). They become outputs of the session: outputs() and run() list them after the model's
  // outputs, in this order. Graph passes never fuse a requested value away (so it holds exactly what
  // the model computes there) and the memory planner keeps it alive to the end of the run. An
  // unknown name, a constant (weights), a name given twice or one that already is a model output is
  // an Error naming the value.
  std::vector<std::string> extra_outputs;
  // Refuse (infer::Error naming the bytes) a session whose arena, weight copies, prepared weights and
  // host inputs/outputs add up to more than this many bytes. 0: no limit of its own; the memory
  // available (host MemAvailable and cgroup limit, or the GPU's free memory) is always checked.
  uint64_t max_memory_bytes = 0;
  // cuda: the GPU (CUDA device ordinal) the session runs on, whatever the calling thread's current
  // device is (each call makes it current and restores the caller's afterwards): one session per GPU,
  // e.g. one Triton instance each (docs/serving.md). -1: the device current when the session is
  // created (0 unless the program chose another). cpu and reference: -1 or 0. An Error names a device
  // the machine lacks.
  int device = -1;
  // cpu: the highest instruction-set level its kernels may use (infer/cpu_isa.h), below the process's
  // (INFER_CPU_ISA, else the best the CPU supports); a cap above it changes nothing. Unset: the process's.
  std::optional<CpuIsa> cpu_isa;
};

// One executed node as the session planned it.
struct NodeInfo {
  std::string name;
  std::string op;
  std::string variant;
  std::vector<std::string> fused;
  Layout layout = Layout::NCHW;  // memory order of its 4-D activations (channels_last pass)
  // cpu: the instructions the variant runs: "avx512", "avx2" or "baseline" (compiled per level and
  // picked at run time, or compiled for baseline x86-64 only), or "openblas" (OpenBLAS's own
  // dispatch); empty on other backends.
  std::string isa;
  Shape output_shape;
  uint64_t workspace_bytes = 0;
};

// A float32 array in the memory of a session's GPU (Session::run_device's outputs), C-contiguous with
// `shape`, freed when the last copy of `data` is destroyed.
struct DeviceTensor {
  Shape shape;
  std::shared_ptr<float> data;
  int device = 0;  // CUDA device ordinal
};

class Session {
 public:
  Session(const Model& model, SessionOptions options = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Runs the model. `inputs` in the model's input order, each with the session's shape, or all at one
  // other batch (the same shapes but their leading size): the outputs then have that batch, and the
  // first run at a batch plans it (kept for later runs).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  // run() over buffers the caller owns and reuses: no allocation, and the host data is touched once
  // each way (copied to and from the backend's staging or arena). inputs as run() takes them;
  // outputs[k] must have output_shapes(inputs)[k] (Error naming the first that does not). For
  // servers and bindings that run large batches (fresh multi-megabyte vectors per run page-fault).
  void run_into(const std::vector<TensorView>& inputs, const std::vector<TensorSpan>& outputs);
  // The shapes run() returns for these inputs (planning their batch if it is new; checks them).
  std::vector<Shape> output_shapes(const std::vector<TensorView>& inputs);

  // Runs on inputs already in this session's GPU memory (cuda only; Error elsewhere): inputs[k] points
  // to inputs()[k]'s float32 elements (at the session's own batch), C-contiguous, ready on the legacy default stream. The outputs
  // are new device arrays; nothing goes through the host. Synchronizes before returning.
  std::vector<DeviceTensor> run_device(const std::vector<const float*>& inputs);
  // The same inputs, the outputs copied to the host as run() returns them.
  std::vector<Tensor> run_device_to_host(const std::vector<const float*>& inputs);

  // Runs `runs` times (after one warm-up) timing every node; medians per node and in total. On cuda
  // the nodes run one by one (not as the CUDA graph) with events between them. Inputs may have
  // another batch, as in run(); the profile is that batch's.
  Profile profile(const std::vector<Tensor>& inputs, int runs);

  // The device time of whole forwards, as TensorRT's trtexec reports "GPU Compute Time": inputs are
  // copied in once, then `warmup` untimed and `runs` timed forwards (on cuda: CUDA-graph replays between
  // two events; on cpu: steady_clock), without the host copies of inputs and outputs. Milliseconds per run.
  std::vector<double> benchmark(const std::vector<Tensor>& inputs, int runs, int warmup = 3);

  // What the session was planned as, at its own batch (not the other batches run() met).
  const std::string& backend() const;
  int64_t batch() const;
  Precision precision() const;
  // The instruction-set level of the cpu kernels (the process's, capped by SessionOptions::cpu_isa).
  CpuIsa cpu_isa() const;
  const std::string& device() const;  // e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)", or the CPU model
  const std::vector<TensorInfo>& inputs() const;   // shapes with the batch fixed
  // The model's outputs, then SessionOptions::extra_outputs in their order; run() returns the same.
  const std::vector<TensorInfo>& outputs() const;
  const std::vector<NodeInfo>& nodes() const;
  const MemoryReport& memory() const;
  // One line per graph pass saying what it did (or that it was off), in the order they ran.
  const std::vector<std::string>& passes() const;

  struct Impl;
  // The engine's view of the session (engine/src/plan.h); not part of the stable API.
  const Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace infer
