// Writes the fuzzers' seed corpora: small valid files of every format, built with the
// tests' own format writers (test/datasets/dataset_test_util.h) and Checkpoint::serialize.
// Usage: make_seeds <dir>  ->  <dir>/{idx,cifar,mat,jpeg,png,shard,checkpoint,json,onnx}/seed-*
#include <cstdio>
#include <filesystem>
#include <string>

#include "datasets/dataset_test_util.h"
#include "checkpoint/Checkpoint.h"
#include "datasets/ByteReader.h"
#include "datasets/ShardWriter.h"
#include "export/OnnxExport.h"
#include "nn/Model.h"
#include "nn/ZooBuilder.h"
#include "images/image_test_util.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

void put(const std::filesystem::path& dir, const std::string& name, const Bytes& bytes) {
  std::filesystem::create_directories(dir);
  write_file((dir / name).string(), bytes);
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

Bytes bytes_of(const ImageBytes& b) { return Bytes(b.begin(), b.end()); }

// Small images of every colour type the decoders expand (4x3 gray and RGB ramps).
void write_image_seeds(const std::filesystem::path& dir) {
  std::vector<std::uint8_t> ramp(4 * 3 * 4);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<std::uint8_t>(i * 5);
  const std::vector<std::uint8_t> gray(ramp.begin(), ramp.begin() + 12), rgb(ramp.begin(), ramp.begin() + 36);
  put(dir / "jpeg", "seed-gray.jpg", bytes_of(encode_jpeg(gray, 4, 3, JCS_GRAYSCALE)));
  put(dir / "jpeg", "seed-rgb.jpg", bytes_of(encode_jpeg(rgb, 4, 3, JCS_RGB)));
  put(dir / "jpeg", "seed-cmyk.jpg", bytes_of(encode_jpeg(ramp, 4, 3, JCS_CMYK)));
  put(dir / "png", "seed-gray.png", bytes_of(encode_png(gray, 4, 3, SPNG_COLOR_TYPE_GRAYSCALE, 8)));
  put(dir / "png", "seed-gray16.png", bytes_of(encode_png(std::vector<std::uint8_t>(ramp.begin(), ramp.begin() + 24), 4, 3,
                                                          SPNG_COLOR_TYPE_GRAYSCALE, 16)));
  put(dir / "png", "seed-palette.png",
      bytes_of(encode_png({0, 1, 2, 1, 0, 1, 2, 1, 0, 0, 0, 2}, 4, 3, SPNG_COLOR_TYPE_INDEXED, 8, {255, 0, 0, 0, 255, 0, 0, 0, 255})));
  put(dir / "png", "seed-rgb.png", bytes_of(encode_png(rgb, 4, 3, SPNG_COLOR_TYPE_TRUECOLOR, 8)));
  put(dir / "png", "seed-rgba.png", bytes_of(encode_png(std::vector<std::uint8_t>(ramp.begin(), ramp.begin() + 48), 4, 3,
                                                        SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, 8)));
}

// A small graph with every kind of layer the exporter writes, as ONNX with its weights (a
// --model-file) and without (a checkpoint's graph).
void write_onnx_seeds(const std::filesystem::path& dir) {
  const ImageShape input{2, 6, 6};
  ZooBuilder b("seed", input);
  b.conv(4, 3, 1, 1).bn().relu();
  const std::string stem = b.current();
  b.grouped_conv(4, 3, 1, 1, 4, false).relu6();
  b.add({b.current(), stem}, true);
  b.concat({b.current(), stem}).lrn().maxpool(2, 2).avgpool(1, 1).global_avgpool().dropout(0.25f).linear(3);
  Model model("seed", b.take(), input, 3);
  model.init(1);
  const auto as_bytes = [](const std::string& s) { return Bytes(s.begin(), s.end()); };
  put(dir / "onnx", "seed-weights.onnx", as_bytes(onnx_bytes(model, true)));
  put(dir / "onnx", "seed-graph.onnx", as_bytes(onnx_bytes(model, false)));
}

// fuzz_shard's input: a flags byte, the index size, the index, shard 0 (ShardWriter's own
// output for 3 raw gray records and 2 JPEG RGB ones, in a scratch directory under dir).
void write_shard_seeds(const std::filesystem::path& dir) {
  const std::filesystem::path scratch = dir / "shard-scratch";
  std::filesystem::create_directories(scratch);
  for (const bool jpeg : {false, true}) {
    ShardIndex head;
    head.encoding = jpeg ? RecordEncoding::kJpeg : RecordEncoding::kRaw;
    head.channels = jpeg ? 3 : 1;
    head.class_names = {"a", "b"};
    head.norm_mean.assign(head.channels, 0.5f);
    head.norm_std.assign(head.channels, 0.25f);
    ShardWriter w(scratch.string(), "train", head);
    std::vector<std::uint8_t> rgb(4 * 3 * 3);
    for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<std::uint8_t>(i * 7);
    const ImageBytes jpg = encode_jpeg(rgb, 4, 3, JCS_RGB);
    for (int i = 0; i < (jpeg ? 2 : 3); ++i) {
      if (jpeg) w.add(std::span<const std::uint8_t>(jpg.data(), jpg.size()), i % 2, 4, 3);
      else w.add(std::span<const std::uint8_t>(rgb.data() + i, 12), i % 2, 4, 3);
    }
    const std::vector<std::uint8_t> index = w.finish().serialize();
    const Bytes shard = read_file_bytes(shard_file_path(scratch.string(), "train", 0));
    Bytes input{0, 0, 0, 0, 0};
    for (int b = 0; b < 4; ++b) input[1 + b] = static_cast<unsigned char>(index.size() >> (8 * b));
    input.insert(input.end(), index.begin(), index.end());
    input.insert(input.end(), shard.begin(), shard.end());
    put(dir / "shard", jpeg ? "seed-jpeg.bin" : "seed-raw.bin", input);
  }
  std::filesystem::remove_all(scratch);
}

Json checkpoint_meta(int num_params) {
  Json config = Json::object();
  config.set("dataset", "synthetic");
  config.set("data_dir", "");
  config.set("normalize", true);
  config.set("mean", Json::array());
  config.set("std", Json::array());
  config.set("synthetic_shape", "1x8x8");
  config.set("synthetic_classes", 10);
  config.set("synthetic_train", 64);
  config.set("synthetic_test", 16);
  config.set("synthetic_seed", 1);
  Json m = Json::object();
  m.set("format_version", Checkpoint::kFormatVersion);
  m.set("model", "logreg");
  m.set("signature", "linear(64->10)");
  m.set("input_shape", "1x8x8");
  m.set("classes", 10);
  m.set("num_params", num_params);
  m.set("world_size", 1);
  m.set("batch_size", 8);
  m.set("global_step", 16);
  m.set("epoch", 2);
  m.set("step_in_epoch", 0);
  m.set("elapsed_s", 0.5);
  m.set("epoch_loss_sum", 0.0);
  m.set("epoch_correct", 0.0);
  m.set("epoch_count", 0.0);
  m.set("epoch_seconds", 0.0);
  m.set("seed", 42);
  m.set("optimizer", "sgd");
  m.set("optimizer_steps", 16);
  m.set("lr", 0.01);
  m.set("test_accuracy", 0.5);
  m.set("config", std::move(config));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <dir>\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];

  Bytes pixels(3 * 4 * 5);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<unsigned char>(i * 7);
  put(dir / "idx", "seed-images.idx", idx_images(3, 4, 5, pixels));
  put(dir / "idx", "seed-images.idx.gz", gzip_bytes(idx_images(3, 4, 5, pixels)));
  put(dir / "idx", "seed-labels.idx", idx_labels({1, 9, 0}));

  Bytes cifar;
  for (int r = 0; r < 2; ++r) {
    cifar.push_back(static_cast<unsigned char>(r * 3));
    for (int p = 0; p < 3072; ++p) cifar.push_back(static_cast<unsigned char>(p + r));
  }
  put(dir / "cifar", "seed-batch.bin", cifar);

  Bytes x_data(32 * 32 * 3 * 2);
  for (std::size_t i = 0; i < x_data.size(); ++i) x_data[i] = static_cast<unsigned char>(i);
  const MatArray x{"X", kMxUint8, {32, 32, 3, 2}, kMiUint8, x_data};
  const MatArray y{"y", kMxDouble, {2, 1}, kMiDouble, doubles({3, 10})};
  const MatArray y_small{"y", kMxDouble, {2, 1}, kMiUint8, Bytes{1, 10}};
  Bytes plain = mat_header();
  for (const Bytes& e : {mat_matrix(x), mat_matrix(y)}) plain.insert(plain.end(), e.begin(), e.end());
  put(dir / "mat", "seed-plain.mat", plain);
  Bytes packed = mat_header();
  for (const Bytes& e : {mat_compressed(mat_matrix(x)), mat_compressed(mat_matrix(y_small))})
    packed.insert(packed.end(), e.begin(), e.end());
  put(dir / "mat", "seed-compressed.mat", packed);

  CheckpointData ck;
  ck.meta = checkpoint_meta(650);
  ck.params.assign(650, 0.25f);
  ck.optimizer_state.assign(650, -1.0f);
  const auto ck_bytes = Checkpoint::serialize(ck);
  put(dir / "checkpoint", "seed-ckpt.rtck",
      Bytes(reinterpret_cast<const unsigned char*>(ck_bytes.data()),
            reinterpret_cast<const unsigned char*>(ck_bytes.data()) + ck_bytes.size()));

  put(dir / "json", "seed-meta.json", text(ck.meta.dump(2)));
  put(dir / "json", "seed-rank.jsonl",
      text("{\"type\":\"step\",\"t\":0.25,\"step\":1,\"data_s\":1e-3,\"loss\":2.3}\n"
           "{\"type\":\"resource\",\"t\":1,\"cpu_percent\":99.5,\"rss_mb\":80}\n"
           "{\"type\":\"event\",\"message\":\"caf\\u00e9 \\\"q\\\" \\\\ \\n\",\"x\":[true,false,null,-0.5]}\n"
           "{\"type\":\"st"));
  write_image_seeds(dir);
  write_shard_seeds(dir);
  write_onnx_seeds(dir);
  std::printf("seeds written to %s\n", dir.c_str());
  return 0;
}
