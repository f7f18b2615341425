// Walks a JPEG's markers the way stb_image does (fill bytes, stuffed FF 00 and restart markers skipped,
// segments skipped by their length, entropy-coded data scanned for the next marker) and checks every
// DHT table's code count. Reads past the end count as 0, as stb's stbi__get8 does, so a table stb would
// read from a truncated file is checked with the same counts stb would see.
#include "jpeg_check.h"

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

}  // namespace infer
