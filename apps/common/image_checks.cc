// The checks of image_checks.h. JPEG: walks the markers the way stb_image does (fill bytes, stuffed
// FF 00 and restart markers skipped, segments skipped by their length, entropy-coded data scanned for
// the next marker) and checks every DHT table's code count; reads past the end count as 0, as stb's
// stbi__get8 does, so a table stb would read from a truncated file is checked with the counts stb
// would see. PNG: walks the chunks from the signature to IEND. BMP: the header fields stb reads.
#include "image_checks.h"

#include "infer/error.h"

namespace infer {

void check_jpeg_huffman_tables(const std::vector<uint8_t>& bytes, const std::string& origin) {
  const size_t size = bytes.size();
  // stb's first marker, like every marker, may follow any number of FF fill bytes: FF FF ... FF D8.
  size_t pos = 0;
  while (pos < size && bytes[pos] == 0xFF) ++pos;
  if (pos == 0 || pos >= size || bytes[pos] != 0xD8) return;
  ++pos;
  auto at = [&](size_t i) -> unsigned { return i < size ? bytes[i] : 0u; };

  while (pos < size) {
    if (bytes[pos] != 0xFF) {  // entropy-coded data (or junk): look for the next marker
      ++pos;
      continue;
    }
    while (pos < size && bytes[pos] == 0xFF) ++pos;  // fill bytes
    if (pos >= size) break;
    const unsigned marker = bytes[pos++];
    if (marker == 0x00 || marker == 0x01 || marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7))
      continue;  // stuffed FF, TEM, SOI, RSTn: no length
    if (marker == 0xD9) break;  // EOI
    const size_t length = (at(pos) << 8) | at(pos + 1);
    if (marker == 0xC4) {
      // DHT: tables until the segment's length is used up, each 1 + 16 + n bytes.
      long left = static_cast<long>(length) - 2;
      size_t p = pos + 2;
      while (left > 0) {
        unsigned n = 0;
        for (size_t i = 0; i < 16; ++i) n += at(p + 1 + i);
        if (n > 256)
          throw Error("cannot decode image '" + origin + "': corrupt JPEG (a Huffman table declares " +
                      std::to_string(n) + " codes; at most 256)");
        p += 17 + n;
        left -= static_cast<long>(17 + n);
      }
    }
    if (length < 2) break;  // stb rejects the file
    pos += length;
  }
}

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

namespace {
uint32_t le32(const std::vector<uint8_t>& b, size_t i) {
  return uint32_t(b[i]) | (uint32_t(b[i + 1]) << 8) | (uint32_t(b[i + 2]) << 16) | (uint32_t(b[i + 3]) << 24);
}
uint32_t le16(const std::vector<uint8_t>& b, size_t i) { return uint32_t(b[i]) | (uint32_t(b[i + 1]) << 8); }
}  // namespace

void check_bmp_pixel_data(const std::vector<uint8_t>& bytes, const std::string& origin) {
  if (bytes.size() < 26 || bytes[0] != 'B' || bytes[1] != 'M') return;  // stb reports short headers
  const uint64_t offset = le32(bytes, 10), header = le32(bytes, 14);
  int64_t width = 0, height = 0;
  uint32_t bpp = 0;
  int32_t compression = 0;
  if (header == 12) {  // OS/2 BITMAPCOREHEADER: 16-bit sizes, no compression field
    width = le16(bytes, 18), height = le16(bytes, 20), bpp = le16(bytes, 24);
  } else {
    if (bytes.size() < 34) return;
    width = int32_t(le32(bytes, 18)), height = int32_t(le32(bytes, 22));
    bpp = le16(bytes, 28), compression = int32_t(le32(bytes, 30));
  }
  // stb reads the compression as a signed int and refuses only 1, 2 (RLE) and >= 4: every other value,
  // negative ones included, decodes as uncompressed rows (the fuzzer's second BMP had 0xFF000000)
  if (compression == 1 || compression == 2 || compression >= 4) return;
  if (width <= 0 || height == 0 || bpp == 0) return;  // stb refuses these itself
  const uint64_t rows = static_cast<uint64_t>(height < 0 ? -height : height);
  const uint64_t row_bits = static_cast<uint64_t>(width) * bpp;
  const uint64_t stride = (row_bits + 31) / 32 * 4, last = (row_bits + 7) / 8;
  const uint64_t need = offset + (rows - 1) * stride + last;
  if (need > bytes.size())
    throw Error("cannot decode image '" + origin + "': corrupt BMP (" + std::to_string(width) + "x" +
                std::to_string(rows) + " pixels at " + std::to_string(bpp) + " bits need " +
                std::to_string(need) + " bytes, the file has " + std::to_string(bytes.size()) + ")");
}

void check_image_bytes(const std::vector<uint8_t>& bytes, const std::string& origin) {
  check_jpeg_huffman_tables(bytes, origin);
  check_png_chunk_lengths(bytes, origin);
  check_bmp_pixel_data(bytes, origin);
}

}  // namespace infer
