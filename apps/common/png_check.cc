// PNG chunk-length check before stb_image (png_check.h): walks the chunks from the signature to IEND
// and compares each declared length with what is left of the file.
#include "png_check.h"

#include "infer/error.h"

namespace infer {

void check_png_chunk_lengths(const std::vector<uint8_t>& bytes, const std::string& origin) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (bytes.size() < 8) return;
  for (int i = 0; i < 8; ++i)
    if (bytes[i] != kSignature[i]) return;
  size_t pos = 8;
  while (bytes.size() - pos >= 8) {  // a chunk header: length (big-endian) and type
    const uint64_t length = (uint64_t(bytes[pos]) << 24) | (uint64_t(bytes[pos + 1]) << 16) |
                            (uint64_t(bytes[pos + 2]) << 8) | uint64_t(bytes[pos + 3]);
    const std::string type(bytes.begin() + pos + 4, bytes.begin() + pos + 8);
    if (length > bytes.size() - pos - 8)
      throw Error("cannot decode image '" + origin + "': corrupt PNG (chunk of " + std::to_string(length) +
                  " bytes at offset " + std::to_string(pos) + ", beyond the end of the file)");
    if (type == "IEND") return;
    pos += 8 + length;
    if (bytes.size() - pos < 4) return;  // no room for the CRC: stb reports the truncation
    pos += 4;
  }
}

}  // namespace infer
