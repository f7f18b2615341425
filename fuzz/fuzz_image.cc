// libFuzzer target (d): PNG / JPEG / BMP bytes -> decode_image (apps/common/image_io.cc), the path
// `infer --input photo.png` takes: stb decode, channel conversion, resize, normalisation. The last byte
// picks gray or RGB and the target size (up to 64x64), so both conversions and the resize are reached.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "image_io.h"
#include "infer/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t pick = data[size - 1];
  const int channels = pick & 1 ? 3 : 1;
  const int side = 1 + (pick >> 2);  // 1..64
  try {
    infer::decode_image(std::vector<uint8_t>(data, data + size), "fuzz.img", channels, side, side,
                        {{0.5f}, {0.25f}});
  } catch (const infer::Error&) {
  }
  return 0;
}
