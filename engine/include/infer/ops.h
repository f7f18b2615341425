// The operator vocabulary shared by the model builder, the engine and every kernel: op kinds and their
// parameters, independent of the file format and of any backend. OpParams' alternative index is the
// OpType, so a node's kind is never stored twice.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace infer {

using Shape = std::vector<int64_t>;

// A tensor's element type as stored (schema/model.fbs). I8 / U8 / I32 are quantized data: int8 /
// uint8 weights and zero points, int32 biases, a quantize_linear output. The engine computes in float:
// an integer constant is widened to float32 at load (exact for I8 / U8; I32 up to 2^24), and an
// I8 / U8 activation holds its integers in the backend's float storage (exact in fp32 and fp16).
enum class DType : uint8_t { F32 = 0, F16 = 1, I8 = 2, U8 = 3, I32 = 4 };
inline bool is_float_dtype(DType d) { return d == DType::F32 || d == DType::F16; }

// The arithmetic a session runs in (SessionOptions::precision). FP32 is strict IEEE float32 (no TF32
// tensor-core rounding); TF32 lets GEMMs round their inputs to TF32 on tensor cores (activations and
// weights stay float32); FP16 stores every activation and constant on the device as IEEE half and
// accumulates in float32. The cpu backend runs FP32 only.
enum class Precision : uint8_t { FP32 = 0, TF32 = 1, FP16 = 2 };
const char* precision_name(Precision p);  // "fp32", "tf32", "fp16"

// How a backend stores a 4-D activation [N,C,H,W] in memory. Shapes are always written NCHW (the
// format's and the reference backend's order); a tensor in NHWC (channels-last) holds the same values
// with the channel index fastest. The cuda (fp16 / tf32) and cpu backends keep tensors NHWC where the
// `channels_last` pass chooses it (engine/src/layout.cc); graph inputs and outputs are always NCHW.
enum class Layout : uint8_t { NCHW = 0, NHWC = 1 };
const char* layout_name(Layout layout);  // "nchw", "nhwc"

// Element-wise non-linearities (standalone Activation nodes or a producer's fused epilogue). Values
// match schema/model.fbs; new kinds are appended, never renumbered. NaN inputs give NaN outputs.
//   None           y = x
//   Relu           y = max(0, x)
//   LeakyRelu      y = x > 0 ? x : alpha * x                         (alpha = slope)
//   Tanh           y = tanh(x)
//   Sigmoid        y = 1 / (1 + exp(-x))
//   Clip           y = min(max(x, alpha), beta)                      (alpha = min, beta = max; ReLU6 = Clip(0, 6))
//   HardSigmoid    y = max(0, min(1, alpha * x + beta))              (alpha = slope, beta = offset)
//   HardSwish      y = x * min(max(x + 3, 0), 6) / 6
//   Silu           y = x * sigmoid(x)                                (Swish)
//   Elu            y = x > 0 ? x : alpha * (exp(x) - 1)
//   Exp            y = exp(x)
//   Sqrt           y = sqrt(x)                                       (NaN for x < 0)
//   Neg            y = -x
//   Abs            y = |x|
//   Softplus       y = log(1 + exp(x))
//   PRelu          y = x >= 0 ? x : slope[c] * x                     (c = the output channel; below)
// Kinds not listed with alpha / beta ignore them.
// PRelu is engine-internal, an epilogue only (no file form, no Activation node): the fuse_prelu pass
// makes it from a per-channel PRelu node after a conv2d, conv_transpose2d or dense, whose last input
// then is the slope [C_out] (a constant; the node always has a bias before it). It is channel c's
// LeakyRelu with alpha = slope[c] (channel_activation below: the same select in every kernel), so the
// element-wise kinds are the first kNumActivationKinds, the ones a file and the builder accept.
enum class ActivationKind : uint8_t {
  None = 0, Relu = 1, LeakyRelu = 2, Tanh = 3, Sigmoid = 4, Clip = 5, HardSigmoid = 6, HardSwish = 7,
  Silu = 8, Elu = 9, Exp = 10, Sqrt = 11, Neg = 12, Abs = 13, Softplus = 14, PRelu = 15
};
constexpr int kNumActivationKinds = 15;  // the element-wise kinds (schema/model.fbs's); PRelu follows

struct Activation {
  ActivationKind kind = ActivationKind::None;
  float alpha = 0.01f;  // LeakyRelu slope, Clip min, HardSigmoid slope, Elu alpha
  float beta = 0.f;     // Clip max, HardSigmoid offset
};

// The epilogue output channel c applies: a per-channel PRelu is LeakyRelu with alpha = slope[c]; any
// other kind is `a` itself (slope unused, may be nullptr).
inline Activation channel_activation(const Activation& a, const float* slope, int64_t c) {
  return a.kind == ActivationKind::PRelu ? Activation{ActivationKind::LeakyRelu, slope[c], 0.f} : a;
}

struct Padding2D {
  int top = 0, left = 0, bottom = 0, right = 0;
};

// x [N,C_in,H,W], weight [C_out,C_in,KH,KW], optional bias [C_out].
struct Conv2DParams {
  int stride_h = 1, stride_w = 1;
  Padding2D pad;
  int dilation_h = 1, dilation_w = 1;  // >= 1 (conv_pool2d: only 1)
  Activation activation;               // fused epilogue
  int groups = 1;  // weight [C_out, C_in/groups, KH, KW]; C_in, C_out divisible (conv_pool2d: 1)
  // Engine-internal (the fuse_conv_residual pass; no file form): inputs are x, weight, bias, r with r
  // of the output's shape, and y = act(conv(x) + bias + r), the residual add of a ResNet block.
  bool add_residual = false;
  // Engine-internal (the fuse_input_epilogue pass; no file form): inputs are x, weight, bias, b_in with
  // b_in [C_in] (constant), and the convolution reads input_activation(x + b_in[c]) in place of x: its
  // producer's bias and activation, applied as the input is loaded instead of in a pass over it.
  bool input_epilogue = false;
  Activation input_activation;  // not PRelu
};

// x [N,C_in,H,W], weight [C_in,C_out/groups,KH,KW], optional bias [C_out].
// H_out = (H-1)*stride_h - pad_top - pad_bottom + dilation_h*(KH-1) + 1 + output_padding_h.
struct ConvTranspose2DParams {
  int stride_h = 1, stride_w = 1;
  Padding2D pad;
  int output_padding_h = 0, output_padding_w = 0;  // < max(stride, dilation) per axis (PyTorch's rule)
  int dilation_h = 1, dilation_w = 1;              // >= 1
  Activation activation;
  int groups = 1;  // divides C_in and C_out; input channel ci feeds the outputs of group ci/(C_in/groups)
};

enum class PoolKind : uint8_t { Max = 0, Average = 1 };

struct Pool2DParams {
  PoolKind kind = PoolKind::Max;
  int kernel_h = 2, kernel_w = 2;
  int stride_h = 2, stride_w = 2;
  Padding2D pad;
  bool count_include_pad = false;
  // Output size ceil((in + pads - k) / s) + 1, less one when that last window would start in the
  // bottom/right padding (PyTorch's rule); windows are clipped at the padded border.
  bool ceil_mode = false;
};

// x [N,F_in], weight [F_out,F_in], optional bias [F_out].
struct DenseParams {
  Activation activation;
};

// x, scale, bias, mean, var; normalises axis 1.
struct BatchNormParams {
  float epsilon = 1e-5f;
  Activation activation;
};

struct ActivationParams {
  Activation activation{ActivationKind::Relu, 0.01f, 0.f};
};

struct FlattenParams {
  int axis = 1;
};

// Per-sample target shape; the batch dimension is kept; at most one -1.
struct ReshapeParams {
  Shape shape;
};

struct SoftmaxParams {
  int axis = 1;
};

// y = x - max - log(sum exp(x - max)) along `axis` (1 <= axis < rank; 1 = NCHW channels), the log of
// Softmax computed without forming it (ONNX LogSoftmax, opset >= 13 semantics: one axis).
struct LogSoftmaxParams {
  int axis = 1;
};

// y = x >= 0 ? x : slope * x (NaN stays NaN). Inputs x [N,C,...] (rank >= 2) and the constant slope:
// [C] (one per channel, axis 1) or [1] (one for all). The fuse_activation pass folds a PRelu whose
// slopes are all equal into its producer as a LeakyRelu epilogue; fuse_prelu folds a per-channel one
// into a conv2d / conv_transpose2d / dense as ActivationKind::PRelu where a kernel variant takes it.
struct PReluParams {};

// Equal shapes only (the residual add of format version 1). Binary (below) is the general form.
// Engine-internal (the fuse_quantized_add pass, cpu; no file form): input k read through the
// per-tensor quantize_linear -> dequantize_linear pair it came through in a QDQ model (ONNX Runtime
// quantizes both inputs of a residual Add): a = float(q - zero_point) * scale with q =
// quantize_linear(x) (DType::U8 / I8), the pair's own values, applied as the add reads x.
struct AddInputQDQ {
  bool on = false;
  float scale = 1.f;         // finite and > 0
  int32_t zero_point = 0;    // in dtype's range
  DType dtype = DType::U8;   // U8 or I8
};
struct AddParams {
  Activation activation;
  AddInputQDQ input_qdq[2];  // engine-internal: see above
};

struct ConcatParams {
  int axis = 1;
};

// conv, then pool x pool average pooling at stride pool, then conv.activation (after the pooling).
struct ConvPool2DParams {
  Conv2DParams conv;
  int pool = 2;
};

enum class BinaryKind : uint8_t { Add = 0, Sub = 1, Mul = 2, Div = 3 };

// y = act(a <kind> b) with NumPy / ONNX multidirectional broadcasting: shapes are aligned at their
// last dims and each pair of dims must be equal or contain a 1. Either input may be a constant; the
// activations among the inputs have equal rank (dim 0 is their batch), and a constant never reaches
// the batch axis (rank below the output's, or a leading 1), so the output keeps the batch as dim 0.
struct BinaryParams {
  BinaryKind kind = BinaryKind::Add;
  Activation activation;  // fused epilogue
};

// x [N,C,H,W] -> [N,C,H+top+bottom,W+left+right]. Constant fills with `value`; Reflect mirrors
// without repeating the border (numpy "reflect", ONNX/PyTorch reflect: pad < size on that axis);
// Edge repeats the border element (ONNX "edge", PyTorch replicate).
enum class PadMode : uint8_t { Constant = 0, Reflect = 1, Edge = 2 };

struct Pad2DParams {
  PadMode mode = PadMode::Constant;
  Padding2D pad;       // elements added on each side, each >= 0
  float value = 0.f;   // Constant mode's fill
};

// Instance normalisation: x [N,C,...] (rank >= 3), scale [C], bias [C]; per (n, c) plane
// y = scale[c] * (x - mean) / sqrt(var + epsilon) + bias[c] with the biased variance, then activation.
struct InstanceNormParams {
  float epsilon = 1e-5f;
  Activation activation;
};

// ShuffleNet's channel shuffle of x [N,C,H,W] (C % groups == 0): the [N,groups,C/groups,H,W] view
// transposed to [N,C/groups,groups,H,W]; output channel j*groups + i reads input channel i*(C/groups) + j.
struct ChannelShuffleParams {
  int groups = 1;
};

// Elements start..end-1 of one axis (1 <= axis < rank; 0 <= start < end <= dim); other axes whole.
struct SliceParams {
  int axis = 1;
  int64_t start = 0, end = 1;
};

// x [N,C,H,W] -> [N,C,HO,WO] with HO = out_h if > 0, else floor(H * scale_h) (same for width). An
// output index o maps to the source coordinate by `coord` with the scale s = scale_h if > 0, else
// HO / H: half_pixel (o + 0.5) / s - 0.5, pytorch_half_pixel the same but 0 when HO = 1,
// align_corners o (H - 1) / (HO - 1) (0 when HO = 1), asymmetric o / s. Nearest rounds it by
// `nearest`, linear interpolates between the two neighbours; both clamp to the image.
enum class ResizeMode : uint8_t { Nearest = 0, Linear = 1 };
enum class ResizeCoord : uint8_t { HalfPixel = 0, AlignCorners = 1, Asymmetric = 2, PytorchHalfPixel = 3 };
enum class ResizeNearest : uint8_t { Floor = 0, RoundPreferFloor = 1, RoundPreferCeil = 2, Ceil = 3 };
struct ResizeParams {
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoord coord = ResizeCoord::HalfPixel;
  ResizeNearest nearest = ResizeNearest::RoundPreferFloor;
  int out_h = 0, out_w = 0;
  float scale_h = 0.f, scale_w = 0.f;
};

// x [N,C,H,W] -> [N, C / b^2, H b, W b] (b = block, C % b^2 == 0): output pixel (h b + i, w b + j) of
// channel c reads input channel (i b + j) C_out + c (DCR) or c b^2 + i b + j (CRD, PixelShuffle).
enum class DepthToSpaceMode : uint8_t { DCR = 0, CRD = 1 };
struct DepthToSpaceParams {
  int block = 2;
  DepthToSpaceMode mode = DepthToSpaceMode::DCR;
};

// ONNX QuantizeLinear (opsets 10-18): y = clamp(round_half_even(x / scale) + zero_point, lo, hi) with
// [lo, hi] = [-128, 127] (I8) or [0, 255] (U8); NaN gives lo (MLAS's rule). Inputs x (float), scale
// (a constant, every element finite and > 0), optional zero_point (a constant of type dtype; 0 when
// absent). A scale of one element quantizes per tensor; else per axis: scale and zero_point are
// [dim(axis)] (an activation's axis never the batch). The output is declared `dtype` and holds
// integers in float storage (fake quantization: what ONNX Runtime computes, exactly).
struct QuantizeLinearParams {
  int axis = 1;            // -rank <= axis < rank
  DType dtype = DType::U8; // I8 or U8
};

// ONNX DequantizeLinear (opsets 10-18): y = float(x - zero_point) * scale, in float32. Inputs x (I8 /
// U8 / I32 data, or a quantize_linear output), scale and optional zero_point as QuantizeLinearParams
// (zero_point of x's type; 0 for I32). A node whose x is a constant is evaluated at load: its output
// is a float32 constant (Value::dequantized keeps the integer source), so QDQ weights run on the
// float kernels.
struct DequantizeLinearParams {
  int axis = 1;
};

// An engine-internal node (never in a file): copies a 4-D activation from one memory layout to the
// other; the shape and the values stay the same. Inserted by the channels_last pass.
struct LayoutParams {
  Layout from = Layout::NCHW, to = Layout::NHWC;
};

// An engine-internal node (never in a file; the fuse_squeeze_excite pass): a squeeze-excitation block
// y = act(x * gate_act(W2 hidden_act(W1 mean(x) + b1) + b2)), the gate broadcast over H and W. Inputs
// x [N,C,H,W], w1 [C_r,C,1,1], b1 [C_r], w2 [C,C_r,1,1], b2 [C]: the global average pool, the two 1x1
// convolutions with their fused activations and the gate multiply it replaced.
struct SqueezeExciteParams {
  Activation hidden_activation;  // after W1 (ReLU, SiLU, ...)
  Activation gate_activation;    // after W2 (Sigmoid, HardSigmoid)
  Activation activation;         // after the multiply (the multiply's own fused epilogue)
};

// An engine-internal node (never in a file; the fuse_depthwise_pointwise pass, cpu): a depthwise conv2d
// (3x3 / 5x5, stride 1 or 2, groups == C, its padding and activation) followed by a 1x1 stride-1 conv2d
// (its activation, and the residual add of fuse_conv_residual) that read the depthwise's output and
// nothing else: MobileNet's inverted-residual projection. Inputs x [N,C,H,W], dw_weight [C,1,KH,KW],
// dw_bias [C], pw_weight [C_out,C,1,1], pw_bias [C_out], and the residual [N,C_out,HO,WO] where
// pointwise.add_residual. The depthwise intermediate is never a tensor of the plan.
struct DepthwisePointwiseParams {
  Conv2DParams depthwise;  // stride, padding, groups (== C), activation; no residual, no PRelu
  Conv2DParams pointwise;  // activation and add_residual; stride 1, no padding, groups 1, no PRelu
};

// An engine-internal node (never in a file; the fuse_quantized_conv2d pass, cpu): a conv2d whose data
// input came through a per-tensor quantize_linear -> dequantize_linear pair and whose weight was
// dequantized at load from int8 with zero point 0 (a QDQ model's convolution, as `infer quantize` and
// ONNX Runtime write it), run in integers: q = clamp(round_half_even(x / x_scale) + x_zero_point) as
// quantize_linear, acc[k] = sum (q - x_zero_point) * w_q exactly in int32, then y = act(float(acc) *
// (x_scale * w_scale[k]) + bias[k] (+ r)). Inputs x [N,C_in,H,W] (float), weight_q [C_out,C_in/groups,
// KH,KW] (the int8 values), weight_scale [C_out] or [1], bias [C_out], and the residual where
// conv.add_residual. The same values as the QDQ nodes and the float conv up to float rounding.
// Between two such nodes the quantized_activations pass (cpu) keeps the tensor in 8 bits: the producer
// writes q = quantize_linear(y) with its reader's y_* = x_* (one byte an element), and the reader's
// x_quantized says its x holds those bytes (x_dtype's values) instead of floats: the same values as
// the float tensor quantized by the reader.
struct QuantizedConv2DParams {
  Conv2DParams conv;          // geometry, activation, add_residual; no PRelu
  float x_scale = 1.f;        // the input's quantize_linear: per tensor, finite and > 0
  int32_t x_zero_point = 0;   // in [0, 255] (U8) or [-128, 127] (I8)
  DType x_dtype = DType::U8;  // U8 or I8
  bool x_quantized = false;   // x holds x_dtype's values (1 byte each), already quantized
  DType y_dtype = DType::F32; // F32: y is float; U8 / I8: y holds quantize_linear(y, y_scale, y_zero_point)
  float y_scale = 1.f;        // (y_dtype U8 / I8) finite and > 0
  int32_t y_zero_point = 0;   // (y_dtype U8 / I8) in its type's range
};

using OpParams = std::variant<Conv2DParams, ConvTranspose2DParams, Pool2DParams, DenseParams,
                              BatchNormParams, ActivationParams, FlattenParams, ReshapeParams,
                              SoftmaxParams, AddParams, ConcatParams, ConvPool2DParams, BinaryParams,
                              Pad2DParams, InstanceNormParams, ChannelShuffleParams, SliceParams,
                              ResizeParams, DepthToSpaceParams, PReluParams, LogSoftmaxParams,
                              QuantizeLinearParams, DequantizeLinearParams, LayoutParams,
                              SqueezeExciteParams, DepthwisePointwiseParams, QuantizedConv2DParams>;

// Every op once, in OpParams' order: X(OpType enumerator, parameter struct, name). OpType is made from
// it; so are the op table (engine/ops/op_def.h: each op's definition is <name>_op in
// engine/ops/<name>.cc, its reference kernel ref::run_<name> in kernels/reference/) and op_name().
// The ops a file can hold come first, in the order of the schema's union (fb::Op is OpType + 1);
// engine-internal ops (Layout, SqueezeExcite, DepthwisePointwise, QuantizedConv2D) stay last. engine/ops/op_util.cc checks at compile time
// that each entry's struct is OpParams' alternative at its index.
#define INFER_OPS(X)                                           \
  X(Conv2D, Conv2DParams, conv2d)                              \
  X(ConvTranspose2D, ConvTranspose2DParams, conv_transpose2d)  \
  X(Pool2D, Pool2DParams, pool2d)                              \
  X(Dense, DenseParams, dense)                                 \
  X(BatchNorm, BatchNormParams, batchnorm)                     \
  X(Activation, ActivationParams, activation)                  \
  X(Flatten, FlattenParams, flatten)                           \
  X(Reshape, ReshapeParams, reshape)                           \
  X(Softmax, SoftmaxParams, softmax)                           \
  X(Add, AddParams, add)                                       \
  X(Concat, ConcatParams, concat)                              \
  X(ConvPool2D, ConvPool2DParams, conv_pool2d)                 \
  X(Binary, BinaryParams, binary)                              \
  X(Pad2D, Pad2DParams, pad2d)                                 \
  X(InstanceNorm, InstanceNormParams, instance_norm)           \
  X(ChannelShuffle, ChannelShuffleParams, channel_shuffle)     \
  X(Slice, SliceParams, slice)                                 \
  X(Resize, ResizeParams, resize)                              \
  X(DepthToSpace, DepthToSpaceParams, depth_to_space)          \
  X(PRelu, PReluParams, prelu)                                 \
  X(LogSoftmax, LogSoftmaxParams, log_softmax)                 \
  X(QuantizeLinear, QuantizeLinearParams, quantize_linear)     \
  X(DequantizeLinear, DequantizeLinearParams, dequantize_linear) \
  X(Layout, LayoutParams, layout)                              \
  X(SqueezeExcite, SqueezeExciteParams, squeeze_excite)        \
  X(DepthwisePointwise, DepthwisePointwiseParams, depthwise_pointwise) \
  X(QuantizedConv2D, QuantizedConv2DParams, quantized_conv2d)

#define INFER_OP_ENUMERATOR(type, params, name) type,
enum class OpType : uint8_t { INFER_OPS(INFER_OP_ENUMERATOR) };
#undef INFER_OP_ENUMERATOR
#define INFER_OP_COUNT(type, params, name) +1
constexpr int kNumOpTypes = 0 INFER_OPS(INFER_OP_COUNT);
#undef INFER_OP_COUNT
constexpr int kNumFileOpTypes = static_cast<int>(OpType::Layout);  // the ops a file can hold

inline OpType op_type(const OpParams& p) { return static_cast<OpType>(p.index()); }

// Stable lower-case names used by --kernel, the profile and kernel variant names:
// conv2d, conv_transpose2d, pool2d, dense, batchnorm, activation, flatten, reshape, softmax, add,
// concat, conv_pool2d, binary, pad2d, instance_norm, channel_shuffle, slice, resize,
// depth_to_space, prelu, log_softmax, quantize_linear, dequantize_linear, layout, squeeze_excite,
// depthwise_pointwise.
const char* op_name(OpType op);
// none, relu, leaky_relu, tanh, sigmoid, clip, hard_sigmoid, hard_swish, silu, elu, exp, sqrt, neg, abs,
// softplus, prelu ("unknown" for a value outside the enum).
const char* activation_name(ActivationKind kind);
const char* binary_kind_name(BinaryKind kind);  // add, sub, mul, div
const char* pad_mode_name(PadMode mode);        // constant, reflect, edge
const char* dtype_name(DType dtype);                // f32, f16, i8, u8, i32 ("unknown" outside)
size_t dtype_size(DType dtype);

// The activation a node applies to its result (None for ops without a fused epilogue).
Activation fused_activation(const OpParams& p);
// Whether a conv2d node reads its input through an engine-internal input epilogue
// (Conv2DParams::input_epilogue); false for every other op.
bool has_input_epilogue(const OpParams& p);

int64_t shape_numel(const Shape& s);       // product of dims (1 for a scalar shape)
std::string shape_str(const Shape& s);     // "1x3x224x224"

}  // namespace infer
