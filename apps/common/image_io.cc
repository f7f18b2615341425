// Image decoding, resizing and PNG grid writing (see image_io.h). This is the one translation unit that
// holds stb's implementations. Decoders are limited to PNG, JPEG and BMP (less code facing untrusted
// files), and an image's size is read from its header and bounded before stb allocates its pixels.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_MAX_DIMENSIONS (1 << 16)
#include <stb/stb_image.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#define STB_IMAGE_RESIZE_IMPLEMENTATION
#include <stb/stb_image_resize.h>

#include "image_io.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>

#include "infer/error.h"
#include "image_checks.h"
#include "npy.h"  // read_file, write_file_atomic

namespace infer {
namespace {

// Bounds that keep every pixel count in int (stb's type) with room to spare.
constexpr int64_t kMaxSide = 1 << 15;
constexpr int64_t kMaxPixels = int64_t(1) << 26;
// Deflate tops out near 1032:1, baseline JPEG near 256 pixels per byte: 4096 leaves real images alone.
constexpr int64_t kMaxPixelsPerByte = 4096;

// The per-channel value of a normalisation vector (empty, one value, or one per channel).
float channel_value(const std::vector<float>& v, int c, float fallback) {
  if (v.empty()) return fallback;
  return v.size() == 1 ? v[0] : v[size_t(c)];
}

void check_normalization(const ImageNormalization& norm, int channels, const std::string& origin) {
  for (const auto* v : {&norm.mean, &norm.std}) {
    const char* what = v == &norm.mean ? "mean" : "std";
    if (v->size() > 1 && v->size() != size_t(channels))
      throw Error("image '" + origin + "': " + what + " has " + std::to_string(v->size()) +
                  " values for " + std::to_string(channels) + " channels");
    for (float x : *v)
      if (!std::isfinite(x)) throw Error("image '" + origin + "': " + what + " is not finite");
  }
  for (float s : norm.std)
    if (s == 0) throw Error("image '" + origin + "': std must not be zero");
}

uint8_t to_byte(float v, float lo, float hi) {
  if (!(v == v)) return 0;  // NaN
  float scaled = (v - lo) / (hi - lo) * 255.f;
  scaled = std::min(255.f, std::max(0.f, scaled));
  return static_cast<uint8_t>(std::lround(scaled));
}

// A picture survives the resize only up to a point: a 9 x 35589 strip stretched to 64 x 64 is noise
// (and stb_image_resize spent seconds on it: fuzz/corpus/image/jpeg_strip.jpg). Refused when the two
// axes' scale factors differ more than 64-fold; checked before decoding too (stb's header is enough).
void check_resize(int w, int h, int width, int height, const std::string& origin) {
  if (w == width && h == height) return;
  const double sx = double(w) / width, sy = double(h) / height;
  if (std::max(sx / sy, sy / sx) > 64.0)
    throw Error("image '" + origin + "' is " + std::to_string(w) + "x" + std::to_string(h) +
                " (width x height): resizing it to " + std::to_string(width) + "x" + std::to_string(height) +
                " would distort its aspect ratio more than 64-fold");
}

// Interleaved HWC pixels in [0, 1] (w x h) -> `out`, [channels, height, width] normalised: resized
// with stb (its default filter) when the size differs, clamped to [0, 1] (the resize filters overshoot
// slightly at edges), then x = (p - mean) / std. Shared by decoded files and generated images.
void hwc_to_input(std::vector<float> src, int w, int h, int channels, int height, int width,
                  const ImageNormalization& norm, const std::string& origin, float* out) {
  std::vector<float> hwc;
  if (w == width && h == height) {
    hwc = std::move(src);
  } else {
    check_resize(w, h, width, height, origin);
    hwc.resize(size_t(width) * size_t(height) * size_t(channels));
    if (!stbir_resize_float(src.data(), w, h, 0, hwc.data(), width, height, 0, channels))
      throw Error("image '" + origin + "': resizing to " + std::to_string(height) + "x" +
                  std::to_string(width) + " failed");
  }
  const size_t plane = size_t(width) * size_t(height);
  for (int c = 0; c < channels; ++c) {
    const float mean = channel_value(norm.mean, c, 0.f);
    const float stddev = channel_value(norm.std, c, 1.f);
    for (size_t i = 0; i < plane; ++i) {
      const float p = std::min(1.f, std::max(0.f, hwc[i * size_t(channels) + size_t(c)]));
      out[size_t(c) * plane + i] = (p - mean) / stddev;
    }
  }
}

}  // namespace

Tensor images_to_input(const Tensor& batch, float lo, float hi, int height, int width,
                       const ImageNormalization& norm) {
  if (batch.shape.size() != 4 || batch.numel() != int64_t(batch.data.size()))
    throw Error("images: expected a 4-D [N,C,H,W] tensor, got " + shape_str(batch.shape));
  const int64_t n = batch.shape[0], c = batch.shape[1], h = batch.shape[2], w = batch.shape[3];
  if (c != 1 && c != 3)
    throw Error("images: " + std::to_string(c) + " channels; a model input needs 1 or 3");
  if (h < 1 || w < 1 || h > kMaxSide || w > kMaxSide || height < 1 || width < 1 ||
      height > kMaxSide || width > kMaxSide)
    throw Error("images: size " + std::to_string(h) + "x" + std::to_string(w) + " -> " +
                std::to_string(height) + "x" + std::to_string(width) + " is out of range");
  if (!(lo < hi) || !std::isfinite(lo) || !std::isfinite(hi))
    throw Error("images: value range " + std::to_string(lo) + "," + std::to_string(hi) + " is empty");
  check_normalization(norm, int(c), "generated");

  Tensor t({n, c, height, width});
  const size_t in_plane = size_t(h) * size_t(w), out_image = size_t(c) * size_t(height) * size_t(width);
  std::vector<float> hwc(in_plane * size_t(c));
  for (int64_t i = 0; i < n; ++i) {
    const float* image = batch.data.data() + size_t(i) * in_plane * size_t(c);
    for (size_t k = 0; k < in_plane; ++k)
      for (int64_t ch = 0; ch < c; ++ch) {
        const float v = image[size_t(ch) * in_plane + k];
        if (!std::isfinite(v))
          throw Error("images: image " + std::to_string(i) + " holds NaN or infinity");
        hwc[k * size_t(c) + size_t(ch)] = (v - lo) / (hi - lo);
      }
    hwc_to_input(hwc, int(w), int(h), int(c), height, width, norm, "generated",
                 t.data.data() + size_t(i) * out_image);
  }
  return t;
}

Tensor decode_image(const std::vector<uint8_t>& bytes, const std::string& origin, int channels,
                    int height, int width, const ImageNormalization& norm) {
  if (channels != 1 && channels != 3)
    throw Error("image '" + origin + "': a model input needs 1 or 3 channels, not " +
                std::to_string(channels));
  if (height < 1 || width < 1 || height > kMaxSide || width > kMaxSide)
    throw Error("image '" + origin + "': requested size " + std::to_string(height) + "x" +
                std::to_string(width) + " is out of range");
  check_normalization(norm, channels, origin);
  if (bytes.size() > size_t(INT_MAX)) throw Error("image '" + origin + "' is too large to decode");

  check_image_bytes(bytes, origin);  // before stb sees the bytes: image_checks.h says why
  const auto* data = bytes.data();
  const int len = static_cast<int>(bytes.size());
  int w = 0, h = 0, file_channels = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &file_channels))
    throw Error("cannot decode image '" + origin + "': " + stbi_failure_reason());
  if (w < 1 || h < 1 || int64_t(w) * h > kMaxPixels)
    throw Error("image '" + origin + "' is too large (" + std::to_string(w) + "x" + std::to_string(h) +
                " pixels)");
  // stb decodes a truncated file's missing data as zeros (JPEG, BMP), so a few hundred bytes may declare
  // and "decode" megapixels of nothing (fuzz/corpus/image/jpeg_tiny_huge.jpg: 588 bytes, 36617 x 217).
  // No real image compresses further than kMaxPixelsPerByte pixels per byte of file.
  if (int64_t(w) * h > kMaxPixelsPerByte * int64_t(bytes.size()))
    throw Error("cannot decode image '" + origin + "': it declares " + std::to_string(w) + "x" +
                std::to_string(h) + " pixels in " + std::to_string(bytes.size()) + " bytes (more than " +
                std::to_string(kMaxPixelsPerByte) + " per byte: truncated or damaged)");
  check_resize(w, h, width, height, origin);

  // stb converts to the requested channel count itself (luminance for RGB -> gray).
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(data, len, &w, &h, &file_channels, channels), stbi_image_free);
  if (!pixels) throw Error("cannot decode image '" + origin + "': " + stbi_failure_reason());

  // Interleaved HWC floats in [0, 1], then resized and normalised.
  const size_t src_count = size_t(w) * size_t(h) * size_t(channels);
  std::vector<float> src(src_count);
  for (size_t i = 0; i < src_count; ++i) src[i] = pixels.get()[i] / 255.f;
  Tensor t({1, channels, height, width});
  hwc_to_input(std::move(src), w, h, channels, height, width, norm, origin, t.data.data());
  return t;
}

Tensor load_image(const std::string& path, int channels, int height, int width,
                  const ImageNormalization& norm) {
  return decode_image(read_file(path), path, channels, height, width, norm);
}

GridLayout grid_layout(int64_t n, int64_t height, int64_t width) {
  if (n < 1 || height < 1 || width < 1 || height > kMaxSide || width > kMaxSide || n > kMaxPixels)
    throw Error("image grid: bad batch geometry " + std::to_string(n) + "x" + std::to_string(height) +
                "x" + std::to_string(width));
  int64_t columns = int64_t(std::ceil(std::sqrt(double(n))));
  while (columns * columns < n) ++columns;  // guard against sqrt rounding down
  while (columns > 1 && (columns - 1) * (columns - 1) >= n) --columns;
  const int64_t rows = (n + columns - 1) / columns;
  const int64_t grid_w = columns * (width + kGridPadding) + kGridPadding;
  const int64_t grid_h = rows * (height + kGridPadding) + kGridPadding;
  if (grid_w > kMaxSide * 4 || grid_h > kMaxSide * 4 || grid_w * grid_h > kMaxPixels)
    throw Error("image grid: " + std::to_string(grid_h) + "x" + std::to_string(grid_w) +
                " pixels is too large to write");
  return GridLayout{int(columns), int(rows), int(grid_w), int(grid_h)};
}

std::vector<uint8_t> encode_png_grid(const Tensor& batch, float lo, float hi) {
  if (batch.shape.size() != 4)
    throw Error("image grid: expected a 4-D [N,C,H,W] tensor, got " + shape_str(batch.shape));
  const int64_t n = batch.shape[0], c = batch.shape[1], h = batch.shape[2], w = batch.shape[3];
  if (c != 1 && c != 3)
    throw Error("image grid: images need 1 or 3 channels, got shape " + shape_str(batch.shape));
  if (!(std::isfinite(lo) && std::isfinite(hi) && lo < hi))
    throw Error("image grid: value range " + std::to_string(lo) + "," + std::to_string(hi) +
                " is not an increasing pair of numbers");
  const GridLayout g = grid_layout(n, h, w);
  if (batch.numel() != int64_t(batch.data.size()))
    throw Error("image grid: tensor shape " + shape_str(batch.shape) + " does not match its data");

  // Interleaved rows for stb; the border and unused cells stay black.
  std::vector<uint8_t> pixels(size_t(g.width) * size_t(g.height) * size_t(c), 0);
  const size_t plane = size_t(h) * size_t(w);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x0 = kGridPadding + (i % g.columns) * (w + kGridPadding);
    const int64_t y0 = kGridPadding + (i / g.columns) * (h + kGridPadding);
    const float* image = batch.data.data() + size_t(i) * size_t(c) * plane;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t ch = 0; ch < c; ++ch) {
          const float v = image[size_t(ch) * plane + size_t(y * w + x)];
          pixels[(size_t(y0 + y) * size_t(g.width) + size_t(x0 + x)) * size_t(c) + size_t(ch)] =
              to_byte(v, lo, hi);
        }
  }

  std::vector<uint8_t> png;
  auto append = [](void* context, void* data, int size) {
    auto* out = static_cast<std::vector<uint8_t>*>(context);
    const auto* p = static_cast<const uint8_t*>(data);
    out->insert(out->end(), p, p + size);
  };
  if (!stbi_write_png_to_func(append, &png, g.width, g.height, int(c), pixels.data(),
                              g.width * int(c)))
    throw Error("image grid: PNG encoding failed");
  return png;
}

void write_image_grid(const std::string& path, const Tensor& batch, float lo, float hi) {
  write_file_atomic(path, encode_png_grid(batch, lo, hi));
}

}  // namespace infer
