// The model zoo (models/zoo.h): docs/design.md's architectures node for node, with seeded weights. Every
// layer is its own node (conv, BatchNorm, activation, pooling): fusing them is the graph passes' job.
// Weights come from splitmix64 through integer arithmetic and one final rounding per value, so a seed
// gives the same bytes on every IEEE-754 platform: no <random>, no libm transcendental (whose last bit
// differs between C libraries). With options.weights every constant comes from that source instead
// (trained weights), checked for shape and range here.
#include "zoo.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "infer/error.h"

namespace infer::zoo {
namespace {

// ---- the weight generator ----------------------------------------------------------------------

// The splitmix64 output function (Steele, Lea, Flood 2014).
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// What a constant is for; part of its stream's seed, so adding a bias never shifts the weights.
enum class Role : uint64_t { Weight = 0, Bias = 1, Scale = 2, Shift = 3, Mean = 4, Var = 5 };

// One splitmix64 stream per (seed, layer, role): layers draw independently of each other.
class Stream {
 public:
  Stream(uint64_t seed, int layer, Role role)
      : state_(mix64(mix64(seed) + (static_cast<uint64_t>(layer) << 8) + static_cast<uint64_t>(role))) {}

  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }

  // Uniform on [0, 1): the top 53 bits, exact in a double.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Standard normal, approximately: Irwin-Hall, the sum of twelve uniforms minus 6 (mean 0, variance
  // 1 - 2^-32, tails cut at +-6). The uniforms are the twelve 16-bit pieces of three draws, piece k
  // standing for (k + 0.5) / 2^16; the sum is an integer, so the result is exact on every platform,
  // which Box-Muller (log, cos) is not.
  double normal() {
    uint64_t sum = 0;
    for (int draw = 0; draw < 3; ++draw) {
      const uint64_t r = next();
      for (int piece = 0; piece < 4; ++piece) sum += (r >> (16 * piece)) & 0xffffULL;
    }
    return (static_cast<double>(sum) + 6.0) * 0x1.0p-16 - 6.0;
  }

 private:
  uint64_t state_;
};

// ---- limits ------------------------------------------------------------------------------------

// Classifier inputs above this are refused outright (the shape arithmetic stays far from overflow).
constexpr int kMaxImageSize = 4096;
// FlatBuffers files must stay under 2 GiB; the zoo keeps its weights well below that.
constexpr uint64_t kMaxWeightBytes = 3ULL << 29;  // 1.5 GiB

// ---- a ModelBuilder that makes layers with generated weights ----------------------------------

// Builds one zoo model. Layers with constants are numbered from 1 in the order they are added; the
// number and the constant's Role seed its stream. Every constant is stored as options.weight_dtype.
class Net {
 public:
  Net(const std::string& name, const ZooOptions& options, std::string size_note)
      : builder_(name), name_(name), options_(options), size_note_(std::move(size_note)) {
    builder_.set_producer("infer model-zoo");
  }

  ModelBuilder& builder() { return builder_; }

  int input(const std::string& name, Shape shape) { return builder_.input(name, std::move(shape)); }

  // Conv2D, weight [C_out, C_in, k, k] ~ N(0, 2 / (C_in k k)) (He et al. 2015, fan-in).
  int conv(const std::string& name, int x, int64_t c_out, int k, int stride, int pad, bool bias) {
    const int64_t c_in = builder_.shape(x).at(1);
    const int layer = ++layers_;
    std::vector<int> inputs{x};
    inputs.push_back(normal_constant(name + ".weight", {c_out, c_in, k, k}, layer, Role::Weight, 0.0,
                                     he_std(c_in * k * k)));
    if (bias) inputs.push_back(normal_constant(name + ".bias", {c_out}, layer, Role::Bias, 0.0, 0.01));
    Conv2DParams p;
    p.stride_h = p.stride_w = stride;
    p.pad = {pad, pad, pad, pad};
    return builder_.node(name, p, inputs);
  }

  // ConvTranspose2D, weight [C_in, C_out, k, k] (PyTorch layout). He with the transposed fan-in: each
  // output element receives C_in k k / stride^2 products on average.
  int tconv(const std::string& name, int x, int64_t c_out, int k, int stride, int pad, bool bias) {
    const int64_t c_in = builder_.shape(x).at(1);
    const int layer = ++layers_;
    const double fan_in = static_cast<double>(c_in * k * k) / static_cast<double>(stride * stride);
    std::vector<int> inputs{x};
    inputs.push_back(normal_constant(name + ".weight", {c_in, c_out, k, k}, layer, Role::Weight, 0.0,
                                     he_std(fan_in)));
    if (bias) inputs.push_back(normal_constant(name + ".bias", {c_out}, layer, Role::Bias, 0.0, 0.01));
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = stride;
    p.pad = {pad, pad, pad, pad};
    return builder_.node(name, p, inputs);
  }

  // Inference BatchNorm with statistics that make folding it visible: scale 1 + 0.1 N, bias 0.1 N,
  // running mean 0.1 N, running var U(0.5, 1.5), epsilon 1e-5.
  int batchnorm(const std::string& name, int x) {
    const int64_t c = builder_.shape(x).at(1);
    const int layer = ++layers_;
    std::vector<int> inputs{x};
    inputs.push_back(normal_constant(name + ".scale", {c}, layer, Role::Scale, 1.0, 0.1));
    inputs.push_back(normal_constant(name + ".bias", {c}, layer, Role::Shift, 0.0, 0.1));
    inputs.push_back(normal_constant(name + ".mean", {c}, layer, Role::Mean, 0.0, 0.1));
    inputs.push_back(uniform_constant(name + ".var", {c}, layer, Role::Var, 0.5, 1.5));
    BatchNormParams p;
    p.epsilon = 1e-5f;
    return builder_.node(name, p, inputs);
  }

  int activation(const std::string& name, int x, ActivationKind kind) {
    ActivationParams p;
    p.activation.kind = kind;
    return builder_.node(name, p, {x});
  }

  int pool(const std::string& name, int x, PoolKind kind, int k, int stride) {
    Pool2DParams p;
    p.kind = kind;
    p.kernel_h = p.kernel_w = k;
    p.stride_h = p.stride_w = stride;
    return builder_.node(name, p, {x});
  }

  int flatten(const std::string& name, int x) { return builder_.node(name, FlattenParams{}, {x}); }

  // Dense, weight [F_out, F_in] ~ N(0, 2 / F_in), bias N(0, 0.01^2).
  int dense(const std::string& name, int x, int64_t f_out) {
    const int64_t f_in = builder_.shape(x).at(1);
    const int layer = ++layers_;
    std::vector<int> inputs{x};
    inputs.push_back(
        normal_constant(name + ".weight", {f_out, f_in}, layer, Role::Weight, 0.0, he_std(f_in)));
    inputs.push_back(normal_constant(name + ".bias", {f_out}, layer, Role::Bias, 0.0, 0.01));
    return builder_.node(name, DenseParams{}, inputs);
  }

 private:
  static double he_std(double fan_in) { return std::sqrt(2.0 / fan_in); }

  // Refuses a constant that would take the model past kMaxWeightBytes, before allocating it.
  int64_t reserve(const std::string& name, const Shape& shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
      // Dims here are at most a few thousand times the image size: no overflow below this check.
      n *= d;
      if (n <= 0 || static_cast<uint64_t>(n) > kMaxWeightBytes) break;
    }
    const uint64_t bytes = static_cast<uint64_t>(n) * dtype_size(options_.weight_dtype);
    if (n <= 0 || static_cast<uint64_t>(n) > kMaxWeightBytes || weight_bytes_ + bytes > kMaxWeightBytes)
      throw Error("zoo: " + name_ + size_note_ + " needs more than 1.5 GiB of weights (at '" + name +
                  "'); use a smaller image size");
    weight_bytes_ += bytes;
    return n;
  }

  // mean + std * N(0, 1), each value rounded once to float. Product and sum are separate statements
  // so no compiler fuses them into an FMA (which would round differently on some machines).
  int normal_constant(const std::string& name, Shape shape, int layer, Role role, double mean,
                      double std) {
    const int64_t n = reserve(name, shape);
    if (options_.weights) return trained_constant(name, std::move(shape));
    Stream stream(options_.seed, layer, role);
    std::vector<float> data(static_cast<size_t>(n));
    for (float& v : data) {
      const double scaled = std * stream.normal();
      const double value = mean + scaled;
      v = static_cast<float>(value);
    }
    return builder_.constant(name, std::move(shape), data, options_.weight_dtype);
  }

  // U(lo, hi), rounded once to float.
  int uniform_constant(const std::string& name, Shape shape, int layer, Role role, double lo,
                       double hi) {
    const int64_t n = reserve(name, shape);
    if (options_.weights) return trained_constant(name, std::move(shape));
    Stream stream(options_.seed, layer, role);
    std::vector<float> data(static_cast<size_t>(n));
    for (float& v : data) {
      const double scaled = (hi - lo) * stream.uniform();
      const double value = lo + scaled;
      v = static_cast<float>(value);
    }
    return builder_.constant(name, std::move(shape), data, options_.weight_dtype);
  }

  // The constant from options.weights under its PyTorch key, checked: exactly `shape`, every value
  // finite and (stored as f16) within float16's range, so a wrong file never becomes a silent inf.
  int trained_constant(const std::string& name, Shape shape) {
    const std::string key = pytorch_key(name);
    const Tensor t = options_.weights(key, shape);
    if (t.shape != shape)
      throw Error("zoo: " + name_ + ": trained weight '" + key + "' has shape " + shape_str(t.shape) +
                  ", the architecture needs " + shape_str(shape));
    if (static_cast<int64_t>(t.data.size()) != shape_numel(shape))
      throw Error("zoo: " + name_ + ": trained weight '" + key + "' holds " +
                  std::to_string(t.data.size()) + " values for shape " + shape_str(shape));
    const float limit = options_.weight_dtype == DType::F16 ? 65504.f : 3.4028235e38f;
    for (size_t i = 0; i < t.data.size(); ++i)
      if (!(std::fabs(t.data[i]) <= limit))
        throw Error("zoo: " + name_ + ": trained weight '" + key + "' value " + std::to_string(i) +
                    " (" + std::to_string(t.data[i]) + ") is not finite in " +
                    dtype_name(options_.weight_dtype));
    return builder_.constant(name, std::move(shape), t.data, options_.weight_dtype);
  }

  ModelBuilder builder_;
  std::string name_;
  ZooOptions options_;
  std::string size_note_;  // " at image size N" for classifiers, for messages
  int layers_ = 0;
  uint64_t weight_bytes_ = 0;
};

// ---- shared model metadata --------------------------------------------------------------------

// The classifier's input side: 0 means the architecture's own; too small for its layers (or absurdly
// large) is an Error naming the limit.
int classifier_size(const std::string& name, const ZooOptions& options, int own, int minimum) {
  const int size = options.image_size == 0 ? own : options.image_size;
  if (size < minimum)
    throw Error("zoo: image size " + std::to_string(size) + " is too small for " + name +
                ": the minimum is " + std::to_string(minimum));
  if (size > kMaxImageSize)
    throw Error("zoo: image size " + std::to_string(size) + " is too large for " + name +
                ": the maximum is " + std::to_string(kMaxImageSize));
  return size;
}

void generator_has_no_size(const std::string& name, const ZooOptions& options) {
  if (options.image_size != 0)
    throw Error("zoo: " + name + " is a generator with a fixed output size; image_size (" +
                std::to_string(options.image_size) + ") applies to classifiers only");
}

std::string size_note(int size) { return " at image size " + std::to_string(size); }

std::string seed_note(const ZooOptions& options) {
  if (options.weights) return std::string("; trained weights (") + dtype_name(options.weight_dtype) + ")";
  return "; seeded random weights (seed " + std::to_string(options.seed) + ", " +
         dtype_name(options.weight_dtype) + ")";
}

// Labels are one per line.
std::string numbered_labels(const std::string& prefix, int count) {
  std::string labels;
  for (int i = 0; i < count; ++i) {
    if (i) labels += '\n';
    labels += prefix + std::to_string(i);
  }
  return labels;
}

void classifier_metadata(ModelBuilder& b, int size, std::string labels, std::string mean,
                         std::string std) {
  b.set_metadata("task", "classifier");
  b.set_metadata("labels", std::move(labels));
  b.set_metadata("input.mean", std::move(mean));
  b.set_metadata("input.std", std::move(std));
  b.set_metadata("input.size", std::to_string(size) + "," + std::to_string(size));
}

const char* kImageNetMean = "0.485,0.456,0.406";
const char* kImageNetStd = "0.229,0.224,0.225";

void generator_metadata(ModelBuilder& b) {
  b.set_metadata("task", "generator");
  b.set_metadata("output.range", "-1,1");
  b.set_metadata("latent.dim", "100");
}

// ---- the architectures (docs/design.md, "The models") -----------------------------------------------

// LeNet-5, pooling before the activation (so conv + avgpool fuses). Spatial sizes: s -> s (conv p2)
// -> s/2 -> s/2 - 4 -> (s/2 - 4)/2, which must be >= 1: s >= 12. 28 gives 16x5x5 = 400 features.
ModelBuilder lenet5(const ZooOptions& o) {
  const int s = classifier_size("lenet5", o, 28, 12);
  Net net("lenet5", o, size_note(s));
  int x = net.input("image", {-1, 1, s, s});
  x = net.conv("conv1", x, 6, 5, 1, 2, true);
  x = net.pool("pool1", x, PoolKind::Average, 2, 2);
  x = net.activation("tanh1", x, ActivationKind::Tanh);
  x = net.conv("conv2", x, 16, 5, 1, 0, true);
  x = net.pool("pool2", x, PoolKind::Average, 2, 2);
  x = net.activation("tanh2", x, ActivationKind::Tanh);
  x = net.flatten("flatten", x);
  x = net.dense("fc1", x, 120);
  x = net.activation("tanh3", x, ActivationKind::Tanh);
  x = net.dense("fc2", x, 84);
  x = net.activation("tanh4", x, ActivationKind::Tanh);
  x = net.dense("fc3", x, 10);
  net.builder().output(x);

  ModelBuilder& b = net.builder();
  b.set_description("LeNet-5: 1x" + std::to_string(s) + "x" + std::to_string(s) +
                    " -> 10 classes, average pooling before tanh" + seed_note(o));
  classifier_metadata(b, s, numbered_labels("", 10), "0.5", "0.5");
  return std::move(b);
}

// AlexNet, torchvision's single tower (its dropout is a no-op at inference; its adaptive 6x6 average
// pool is the identity at 224 and left out, so the flattened size follows the image size). Sizes:
// conv1 (s - 7)/4 + 1, then three 3/2 max pools; the last pool needs 3 inputs, so conv1 must give
// >= 15: s >= 63. 224 gives 256x6x6 = 9216 features.
ModelBuilder alexnet(const ZooOptions& o) {
  const int s = classifier_size("alexnet", o, 224, 63);
  Net net("alexnet", o, size_note(s));
  int x = net.input("image", {-1, 3, s, s});
  x = net.conv("conv1", x, 64, 11, 4, 2, true);
  x = net.activation("relu1", x, ActivationKind::Relu);
  x = net.pool("pool1", x, PoolKind::Max, 3, 2);
  x = net.conv("conv2", x, 192, 5, 1, 2, true);
  x = net.activation("relu2", x, ActivationKind::Relu);
  x = net.pool("pool2", x, PoolKind::Max, 3, 2);
  x = net.conv("conv3", x, 384, 3, 1, 1, true);
  x = net.activation("relu3", x, ActivationKind::Relu);
  x = net.conv("conv4", x, 256, 3, 1, 1, true);
  x = net.activation("relu4", x, ActivationKind::Relu);
  x = net.conv("conv5", x, 256, 3, 1, 1, true);
  x = net.activation("relu5", x, ActivationKind::Relu);
  x = net.pool("pool5", x, PoolKind::Max, 3, 2);
  x = net.flatten("flatten", x);
  x = net.dense("fc1", x, 4096);
  x = net.activation("relu6", x, ActivationKind::Relu);
  x = net.dense("fc2", x, 4096);
  x = net.activation("relu7", x, ActivationKind::Relu);
  x = net.dense("fc3", x, 1000);
  net.builder().output(x);

  ModelBuilder& b = net.builder();
  b.set_description("AlexNet (torchvision single tower): 3x" + std::to_string(s) + "x" +
                    std::to_string(s) + " -> 1000 classes" + seed_note(o));
  classifier_metadata(b, s, numbered_labels("class ", 1000), kImageNetMean, kImageNetStd);
  return std::move(b);
}

// VGG (torchvision cfg A = vgg11, cfg D = vgg16, no BatchNorm): 3x3 p1 convs + relu; 0 in `cfg` is a
// 2x2 max pool. Five pools halve the size five times: s >= 32. 224 gives 512x7x7 = 25088 features.
ModelBuilder vgg(const std::string& name, const std::vector<int>& cfg, const ZooOptions& o) {
  const int s = classifier_size(name, o, 224, 32);
  Net net(name, o, size_note(s));
  int x = net.input("image", {-1, 3, s, s});
  int block = 1, conv_in_block = 1;
  for (int c : cfg) {
    const std::string suffix = std::to_string(block) + "_" + std::to_string(conv_in_block);
    if (c == 0) {
      x = net.pool("pool" + std::to_string(block), x, PoolKind::Max, 2, 2);
      ++block;
      conv_in_block = 1;
    } else {
      x = net.conv("conv" + suffix, x, c, 3, 1, 1, true);
      x = net.activation("relu" + suffix, x, ActivationKind::Relu);
      ++conv_in_block;
    }
  }
  x = net.flatten("flatten", x);
  x = net.dense("fc1", x, 4096);
  x = net.activation("relu6", x, ActivationKind::Relu);
  x = net.dense("fc2", x, 4096);
  x = net.activation("relu7", x, ActivationKind::Relu);
  x = net.dense("fc3", x, 1000);
  net.builder().output(x);

  ModelBuilder& b = net.builder();
  b.set_description(std::string(name == "vgg11" ? "VGG-11 (cfg A" : "VGG-16 (cfg D") +
                    ", no BatchNorm): 3x" + std::to_string(s) + "x" + std::to_string(s) +
                    " -> 1000 classes" + seed_note(o));
  classifier_metadata(b, s, numbered_labels("class ", 1000), kImageNetMean, kImageNetStd);
  return std::move(b);
}

// The generators' shared body: z [-1,100,1,1]; tconv k4 s1 p0 to 4x4, then one k4 s2 p1 tconv per
// entry of `widths` after the first; every one of them (the first included, as in Radford et al.)
// without bias and followed by BatchNorm + relu. Returns the last relu.
int generator_body(Net& net, const std::vector<int64_t>& widths) {
  int x = net.input("z", {-1, 100, 1, 1});
  for (size_t i = 0; i < widths.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    const bool first = i == 0;
    x = net.tconv("tconv" + n, x, widths[i], 4, first ? 1 : 2, first ? 0 : 1, false);
    x = net.batchnorm("bn" + n, x);
    x = net.activation("relu" + n, x, ActivationKind::Relu);
  }
  return x;
}

// DCGAN generator (Radford et al.; Table 4 geometry): 1024x4x4 -> 512x8x8 -> 256x16x16 -> 128x32x32,
// then tconv 128->3 k4 s2 p1 with bias to 64x64, tanh.
ModelBuilder dcgan(const ZooOptions& o) {
  generator_has_no_size("dcgan", o);
  Net net("dcgan", o, "");
  int x = generator_body(net, {1024, 512, 256, 128});
  x = net.tconv("tconv5", x, 3, 4, 2, 1, true);
  x = net.activation("tanh", x, ActivationKind::Tanh);
  net.builder().output(x);

  ModelBuilder& b = net.builder();
  b.set_description("DCGAN generator (Radford et al.): z 100 -> 3x64x64 in [-1,1]" + seed_note(o));
  generator_metadata(b);
  return std::move(b);
}

// EB-GAN generator (Table 4 geometry): 2048x4x4 -> 1024x8x8 -> ... -> 64x128x128 -> 64x256x256, then
// conv 64->3 k3 p1 with bias, tanh.
ModelBuilder ebgan(const ZooOptions& o) {
  generator_has_no_size("ebgan", o);
  Net net("ebgan", o, "");
  int x = generator_body(net, {2048, 1024, 512, 256, 128, 64, 64});
  x = net.conv("conv8", x, 3, 3, 1, 1, true);
  x = net.activation("tanh", x, ActivationKind::Tanh);
  net.builder().output(x);

  ModelBuilder& b = net.builder();
  b.set_description("EB-GAN generator: z 100 -> 3x256x256 in [-1,1]" + seed_note(o));
  generator_metadata(b);
  return std::move(b);
}

// The shipped EB-GAN generator trained on Fashion-MNIST (models/train/train_ebgan.py; widths and BN
// epsilon from its manifest.json): 512x4x4 -> 256x8x8 -> 128x16x16 -> 64x32x32, then tconv 64->1 k4
// s2 p1 with bias to 1x64x64, tanh. Grayscale, unlike the Table 4 geometries above.
ModelBuilder ebgan_fashion(const ZooOptions& o) {
  generator_has_no_size("ebgan_fashion", o);
  Net net("ebgan_fashion", o, "");
  int x = generator_body(net, {512, 256, 128, 64});
  x = net.tconv("tconv5", x, 1, 4, 2, 1, true);
  x = net.activation("tanh", x, ActivationKind::Tanh);
  net.builder().output(x);

  ModelBuilder& b = net.builder();
  b.set_description("EB-GAN generator for Fashion-MNIST: z 100 -> 1x64x64 grayscale in [-1,1]" +
                    seed_note(o));
  generator_metadata(b);
  return std::move(b);
}

}  // namespace

std::string pytorch_key(const std::string& zoo_name) {
  const std::pair<const char*, const char*> renames[] = {
      {".scale", ".weight"}, {".mean", ".running_mean"}, {".var", ".running_var"}};
  for (const auto& [zoo_suffix, torch_suffix] : renames) {
    const std::string suffix = zoo_suffix;
    if (zoo_name.size() > suffix.size() &&
        zoo_name.compare(zoo_name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return zoo_name.substr(0, zoo_name.size() - suffix.size()) + torch_suffix;
  }
  return zoo_name;
}

const std::vector<std::string>& names() {
  static const std::vector<std::string> kNames{"lenet5", "alexnet", "vgg11", "vgg16", "dcgan", "ebgan"};
  return kNames;
}

ModelBuilder build(const std::string& name, const ZooOptions& options) {
  if (options.weight_dtype != DType::F32 && options.weight_dtype != DType::F16)
    throw Error("zoo: weight dtype " + std::to_string(static_cast<int>(options.weight_dtype)) +
                " is not supported (f32 or f16)");
  if (name == "lenet5") return lenet5(options);
  if (name == "alexnet") return alexnet(options);
  if (name == "vgg11") return vgg(name, {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}, options);
  if (name == "vgg16")
    return vgg(name, {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0},
               options);
  if (name == "dcgan") return dcgan(options);
  if (name == "ebgan") return ebgan(options);
  if (name == "ebgan_fashion") return ebgan_fashion(options);

  std::string known;
  for (const std::string& n : names()) known += (known.empty() ? "" : ", ") + n;
  known += ", ebgan_fashion";
  throw Error("zoo: unknown model '" + name + "' (known: " + known + ")");
}

}  // namespace infer::zoo
