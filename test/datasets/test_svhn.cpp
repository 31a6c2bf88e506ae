// SVHN / MAT-file v5 reader on files written here: uncompressed and miCOMPRESSED elements,
// small-element tags, column-major -> CHW, label 10 -> 0, and the error cases.
#include <catch2/catch.hpp>

#include "dataset_test_util.h"
#include "datasets/Dataset.h"
#include "datasets/MatFile.h"
#include "datasets/SvhnReader.h"

using namespace ringtrain;
using namespace ringtrain::test;
using Catch::Matchers::Contains;

namespace {

int pixel(int r, int c, int ch, int n) { return (r * 7 + c * 13 + ch * 50 + n * 31) % 256; }

// X (32, 32, 3, n) uint8 stored column-major: element (r, c, ch, i) at r + 32(c + 32(ch + 3i)).
MatArray svhn_x(int n) {
  MatArray x{"X", kMxUint8, {32, 32, 3, n}, kMiUint8, Bytes(32 * 32 * 3 * n)};
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < 3; ++ch)
      for (int c = 0; c < 32; ++c)
        for (int r = 0; r < 32; ++r) x.data[r + 32 * (c + 32 * (ch + 3 * i))] = static_cast<unsigned char>(pixel(r, c, ch, i));
  return x;
}

MatArray svhn_y_double(const std::vector<double>& y) {
  return {"y", kMxDouble, {static_cast<int>(y.size()), 1}, kMiDouble, doubles(y)};
}

Bytes mat_file(const std::vector<Bytes>& elements) {
  Bytes b = mat_header();
  for (const auto& e : elements) b.insert(b.end(), e.begin(), e.end());
  return b;
}

void check_svhn_values(const Dataset& d, const std::vector<int>& labels) {
  REQUIRE(d.size() == labels.size());
  REQUIRE(d.shape() == ImageShape{3, 32, 32});
  std::vector<float> x(3072);
  for (std::size_t i = 0; i < d.size(); ++i) {
    CHECK(d.label(i) == labels[i]);
    d.get(i, x.data());
    int wrong = 0;
    for (int ch = 0; ch < 3; ++ch)
      for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c)
          if (x[ch * 1024 + r * 32 + c] != Approx(pixel(r, c, ch, static_cast<int>(i)) / 255.0)) ++wrong;
    CHECK(wrong == 0);
  }
}

}  // namespace

TEST_CASE("SVHN from uncompressed MAT elements: CHW pixels, y as double, 10 -> 0", "[svhn]") {
  TempDir dir;
  // An unrelated variable with a long (non-small) name comes first and must be skipped.
  const MatArray extra{"extra_variable", kMxDouble, {1, 2}, kMiDouble, doubles({1.5, 2.5})};
  write_file(dir.file("train_32x32.mat"),
             mat_file({mat_matrix(extra), mat_matrix(svhn_x(3)), mat_matrix(svhn_y_double({10, 3, 7}))}));
  auto d = read_svhn_mat(dir.file("train_32x32.mat"));
  check_svhn_values(*d, {0, 3, 7});

  const MatFile mat(dir.file("train_32x32.mat"));
  REQUIRE(mat.variables().size() == 3);
  CHECK(mat.variables()[0].name == "extra_variable");
  CHECK(mat.variable("X").dims == std::vector<std::uint64_t>{32, 32, 3, 3});
}

TEST_CASE("SVHN from miCOMPRESSED elements, y as uint8 in a small element", "[svhn]") {
  TempDir dir;
  const MatArray y{"y", kMxDouble, {2, 1}, kMiUint8, Bytes{1, 10}};  // MATLAB stores small doubles as uint8
  write_file(dir.file("train_32x32.mat"), mat_file({mat_compressed(mat_matrix(svhn_x(2))), mat_compressed(mat_matrix(y))}));
  write_file(dir.file("test_32x32.mat"), mat_file({mat_matrix(svhn_x(1)), mat_compressed(mat_matrix(svhn_y_double({5})))}));
  DatasetConfig config;
  config.name = "svhn";
  config.data_dir = dir.str();
  config.normalize = false;
  auto splits = load_dataset(config);
  check_svhn_values(*splits.train, {1, 0});
  check_svhn_values(*splits.test, {5});
}

TEST_CASE("SVHN / MAT-file errors name the file and the problem", "[svhn]") {
  TempDir dir;
  const std::string path = dir.file("train_32x32.mat");

  SECTION("missing variable") {
    write_file(path, mat_file({mat_matrix(svhn_x(2))}));
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("variable 'y' not found") && Contains("holds: X"));
  }
  SECTION("wrong type: y as a char array") {
    const MatArray y{"y", kMxChar, {1, 2}, kMiUint16, Bytes{'1', 0, '2', 0}};
    write_file(path, mat_file({mat_matrix(svhn_x(2)), mat_matrix(y)}));
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("'y' is a char array"));
  }
  SECTION("wrong dimensions of X") {
    MatArray x = svhn_x(2);
    x.dims = {32, 32, 6};
    write_file(path, mat_file({mat_matrix(x), mat_matrix(svhn_y_double({1}))}));
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("'X' has dimensions 32x32x6"));
  }
  SECTION("dims that disagree with the stored data") {
    MatArray x = svhn_x(2);
    x.data.resize(x.data.size() - 8);
    write_file(path, mat_file({mat_matrix(x), mat_matrix(svhn_y_double({1, 2}))}));
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("'X'"));
  }
  SECTION("image and label counts disagree") {
    write_file(path, mat_file({mat_matrix(svhn_x(2)), mat_matrix(svhn_y_double({1, 2, 3}))}));
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("2 images but 'y' holds 3 labels"));
  }
  SECTION("label out of range") {
    write_file(path, mat_file({mat_matrix(svhn_x(2)), mat_matrix(svhn_y_double({1, 11}))}));
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("label 11 at index 1 out of range"));
  }
  SECTION("non-integer label") {
    write_file(path, mat_file({mat_matrix(svhn_x(2)), mat_matrix(svhn_y_double({1, 2.5}))}));
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("expected integers 0..255"));
  }
  SECTION("small element claiming more than its 4 bytes") {
    // y's real part as a small element whose size field says 40 bytes (5 doubles): the
    // reader must refuse it rather than copy 40 bytes out of the tag's 4-byte data word.
    Bytes y = mat_matrix({"y", kMxDouble, {5, 1}, kMiUint8, Bytes{1, 2, 3, 4}});
    const std::size_t real_tag = y.size() - 8;  // the last subelement: small uint8 tag + 4 bytes
    const std::uint32_t word = 40u << 16 | kMiDouble;
    for (int k = 0; k < 4; ++k) y[real_tag + k] = static_cast<unsigned char>(word >> (8 * k));
    write_file(path, mat_file({mat_matrix(svhn_x(5)), y}));
    REQUIRE_THROWS_WITH(read_svhn_mat(path),
                        Contains(path) && Contains("small-element real part claims 40 bytes"));
  }
  SECTION("truncated file") {
    Bytes b = mat_file({mat_matrix(svhn_y_double({1, 2})), mat_matrix(svhn_x(2))});
    b.resize(b.size() - 1000);
    write_file(path, b);
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("truncated"));
  }
  SECTION("truncated compressed element") {
    Bytes x = mat_compressed(mat_matrix(svhn_x(2)));
    x.resize(x.size() - x.size() / 2);
    // Fix up the element's size so only the zlib stream is short.
    const auto n = static_cast<std::uint32_t>(x.size() - 8);
    for (int k = 0; k < 4; ++k) x[4 + k] = static_cast<unsigned char>(n >> (8 * k));
    write_file(path, mat_file({mat_matrix(svhn_y_double({1, 2})), x}));
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("compressed element truncated"));
  }
  SECTION("v7.3 (HDF5) file") {
    Bytes b = mat_header("MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 .",
                         0x0200);
    b.resize(512, 0);
    const char sig[] = "\x89HDF\r\n\x1a\n";
    b.insert(b.end(), sig, sig + 8);
    b.resize(2048, 0);
    write_file(path, b);
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("v7.3") && Contains("HDF5") && Contains("-v7"));
  }
  SECTION("not a MAT-file") {
    write_file(path, Bytes(300, 'x'));
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("not a MAT-file v5"));
  }
  SECTION("missing files name the expected ones") {
    REQUIRE_THROWS_WITH(read_svhn_mat(path), Contains(path) && Contains("test_32x32.mat"));
  }
}
