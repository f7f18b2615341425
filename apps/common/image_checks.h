// Checks made on image bytes before any of them reaches stb_image (Debian 12's 2.27), each closing a
// hole the image fuzzer found, listed in docs/reliability.md. Bytes of another format pass each check
// untouched; check_image_bytes runs all three.
// - JPEG: stb writes a Huffman table's code sizes and symbols into fixed 257- and 256-entry arrays
//   without checking that a DHT table's 16 code counts add up to at most 256 (fixed upstream in 2.28).
// - PNG: stb grows its IDAT buffer to a chunk's declared length before reading the chunk, so a damaged
//   length (up to 2^31) makes it allocate gigabytes for a file of a few bytes.
// - BMP: stb reads past the end of the file as zeros, so a 158-byte header declaring 2054 x 32260
//   pixels decoded as a 66-megapixel black image (and took the fuzzer's 10 s to resize).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace infer {

// Throws infer::Error "cannot decode image '<origin>': corrupt JPEG (...)" when `bytes` start like a
// JPEG to stb (FF, any more FF fill bytes, D8) and any DHT table stb would read declares more than 256
// codes.
void check_jpeg_huffman_tables(const std::vector<uint8_t>& bytes, const std::string& origin);

// Throws "cannot decode image '<origin>': corrupt PNG (...)" when `bytes` carry the PNG signature and a
// chunk before IEND declares more data than the file holds after its header.
void check_png_chunk_lengths(const std::vector<uint8_t>& bytes, const std::string& origin);

// Throws "cannot decode image '<origin>': corrupt BMP (...)" when `bytes` start with "BM", stb would
// read the pixel data as uncompressed rows (every compression value but 1, 2 and >= 4 as a signed
// int) and the file ends before the last row's pixels (its padding may be missing).
void check_bmp_pixel_data(const std::vector<uint8_t>& bytes, const std::string& origin);

// All of the above.
void check_image_bytes(const std::vector<uint8_t>& bytes, const std::string& origin);

}  // namespace infer
