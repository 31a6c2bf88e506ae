// A reader for numeric variables in MATLAB level-5 MAT-files (MathWorks, "MAT-File
// Format", 2023): 128-byte header, tagged data elements, miMATRIX and miCOMPRESSED.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain {

// mxClass values of the array-flags subelement (numeric ones are 6..15).
enum class MatClass : int {
  kCell = 1, kStruct = 2, kObject = 3, kChar = 4, kSparse = 5, kDouble = 6, kSingle = 7,
  kInt8 = 8, kUint8 = 9, kInt16 = 10, kUint16 = 11, kInt32 = 12, kUint32 = 13, kInt64 = 14, kUint64 = 15,
};
const char* mat_class_name(int mx_class);

struct MatVariable {
  std::string name;
  int mx_class = 0;                // MatClass
  bool complex = false;
  std::vector<std::uint64_t> dims;  // MATLAB order (column-major: first dim varies fastest)
  std::uint64_t numel() const;
};

class MatFile {
 public:
  // Reads the file, checks the header (v7.3/HDF5, v4 and big-endian files are refused
  // with a message saying so), and indexes its top-level variables without decoding data.
  explicit MatFile(std::string path);

  const std::string& path() const noexcept { return path_; }
  const std::vector<MatVariable>& variables() const noexcept { return variables_; }
  // Throws std::runtime_error naming the file, the variable and the ones present.
  const MatVariable& variable(const std::string& name) const;

  // Decodes the real part of a numeric variable into dst (numel values), converting from
  // the stored type; every value must be an integer in 0..255.
  void read_uint8(const std::string& name, std::uint8_t* dst, std::size_t count) const;

  // Upper bound on the bytes a variable's data can decode to, from its element's size in
  // the file (times deflate's maximum ratio when compressed): check before allocating.
  std::uint64_t max_decoded_bytes(const std::string& name) const;

 private:
  struct Entry {
    std::size_t offset = 0;  // of the element's data (after its tag)
    std::size_t bytes = 0;
    bool compressed = false;
  };
  std::string path_;
  std::vector<unsigned char> bytes_;
  std::vector<MatVariable> variables_;
  std::vector<Entry> entries_;
};

}  // namespace ringtrain
