// A check of JPEG Huffman tables made before any byte reaches stb_image. Debian 12's stb_image 2.27
// writes a table's code sizes and symbols into fixed 257- and 256-entry arrays without checking that
// the 16 code counts of a DHT segment add up to at most 256 (fixed upstream in 2.28); the image fuzzer
// found it (fuzz/corpus/image/regress_dht_overflow.jpg). Non-JPEG bytes pass untouched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace infer {

// Throws infer::Error "cannot decode image '<origin>': corrupt JPEG (...)" when `bytes` start like a
// JPEG to stb (FF, any more FF fill bytes, D8) and any DHT table stb would read declares more than 256
// codes.
void check_jpeg_huffman_tables(const std::vector<uint8_t>& bytes, const std::string& origin);

}  // namespace infer
