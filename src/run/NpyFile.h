// A float32 matrix as a NumPy .npy file (format version 1.0), the form `eval --logits` writes:
// numpy.load reads it without ringtrain, and so does any .npy reader.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace ringtrain {

// Writes data (rows x cols, row-major) to path as .npy: the magic "\x93NUMPY", version 1.0,
// a little-endian uint16 header length, the header dict {'descr': '<f4', 'fortran_order':
// False, 'shape': (rows, cols), } padded with spaces and a newline to a multiple of 64
// bytes, then the floats little-endian. Through a temporary file renamed over path, so a
// failure leaves no partial file. Throws std::invalid_argument if data is not rows x cols,
// std::runtime_error naming path if it cannot be written.
void write_npy(const std::filesystem::path& path, std::size_t rows, std::size_t cols, std::span<const float> data);

}  // namespace ringtrain
