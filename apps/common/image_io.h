// Images for the apps, through stb: decode a PNG / JPEG / BMP into a normalised NCHW float tensor, and
// write a generator's batch as one PNG grid. Bad or undecodable files and failed writes are infer::Error
// naming the path; sizes are checked before any allocation so no image can exhaust memory.
#pragma once

#include <string>
#include <vector>

#include "infer/tensor.h"

namespace infer {

// Per-channel normalisation applied to pixels scaled to [0, 1]: x = (p/255 - mean[c]) / std[c].
// Each vector is empty (mean 0 / std 1), has one value (every channel) or one value per channel.
struct ImageNormalization {
  std::vector<float> mean;
  std::vector<float> std;
};

// Decodes the image at path into a [1, channels, height, width] tensor: channels converted (gray <->
// RGB; alpha dropped), resized to height x width when the sizes differ, then normalised.
// channels must be 1 or 3.
Tensor load_image(const std::string& path, int channels, int height, int width,
                  const ImageNormalization& norm = {});

// Decodes an image held in memory (origin names it in messages); as load_image.
Tensor decode_image(const std::vector<uint8_t>& bytes, const std::string& origin, int channels,
                    int height, int width, const ImageNormalization& norm = {});

// A batch of images [N, C, H, W] with values in [lo, hi] (a generator's output) as a model input
// [N, C, height, width], prepared exactly as load_image prepares a decoded file: values mapped
// linearly to [0, 1], resized with stb when the size differs, clamped to [0, 1], normalised. C is 1
// or 3; a NaN or infinite value is an Error (never a silently clamped pixel).
Tensor images_to_input(const Tensor& batch, float lo, float hi, int height, int width,
                       const ImageNormalization& norm = {});

// The PNG bytes of a batch [N, C, H, W] (C 1 or 3) laid out as a grid of ceil(sqrt(N)) columns with a
// 2-pixel black border around every image. Values map linearly from [lo, hi] to 0..255, clamped
// (NaN -> 0).
std::vector<uint8_t> encode_png_grid(const Tensor& batch, float lo, float hi);

// Writes encode_png_grid(batch, lo, hi) to path (temp file + rename).
void write_image_grid(const std::string& path, const Tensor& batch, float lo, float hi);

// The grid geometry encode_png_grid uses, for callers that describe or test it.
struct GridLayout {
  int columns = 0, rows = 0;
  int width = 0, height = 0;  // pixels of the whole grid
};
constexpr int kGridPadding = 2;
GridLayout grid_layout(int64_t n, int64_t height, int64_t width);

}  // namespace infer
