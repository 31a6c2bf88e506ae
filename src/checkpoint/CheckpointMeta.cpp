// Checkpoint metadata validation: one check per key written by the trainer's checkpoint
// writer (TrainerCheckpoint.cpp), with the ranges its readers rely on.
#include "checkpoint/CheckpointMeta.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "common/MemoryBudget.h"
#include "datasets/Dataset.h"
#include "nn/Model.h"
#include "optim/Optimizer.h"
#include "checkpoint/Checkpoint.h"

namespace ringtrain {
namespace {

// Values that no run reaches and every reader can still hold in its types: counts of
// ranks, classes and steps far beyond any real job, yet far from any overflow.
constexpr std::int64_t kMaxRanks = 1 << 24;
constexpr std::int64_t kMaxClasses = 1 << 20;
constexpr std::int64_t kMaxSteps = std::int64_t{1} << 53;

class MetaChecker {
 public:
  MetaChecker(const Json& object, std::string prefix, const std::string& source)
      : object_(object), prefix_(std::move(prefix)), source_(source) {}

  [[noreturn]] void fail(std::string_view key, std::string_view expected, std::string_view got) const {
    throw std::runtime_error(
        fmt::format("{}: meta: key '{}{}': expected {}, got {}", source_, prefix_, key, expected, got));
  }

  const Json& at(std::string_view key, std::string_view expected) const {
    const Json* v = object_.find(key);
    if (v == nullptr) fail(key, expected, "nothing (the key is missing)");
    return *v;
  }

  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi) const {
    const std::string expected = fmt::format("an integer in [{}, {}]", lo, hi);
    const Json& v = at(key, expected);
    // A whole number written as a double (1e3) counts; one beyond int64 does not.
    const bool whole = v.is_integer() || (v.is_number() && std::nearbyint(v.as_double()) == v.as_double() &&
                                          v.as_double() >= -0x1p63 && v.as_double() < 0x1p63);
    if (!whole) fail(key, expected, shown(v));
    const std::int64_t i = v.as_int();
    if (i < lo || i > hi) fail(key, expected, shown(v));
    return i;
  }

  double number(std::string_view key, double lo) const {
    const std::string expected = fmt::format("a finite number >= {}", lo);
    const Json& v = at(key, expected);
    if (!v.is_number() || !std::isfinite(v.as_double()) || v.as_double() < lo) fail(key, expected, shown(v));
    return v.as_double();
  }

  const std::string& string(std::string_view key) const {
    const Json& v = at(key, "a string");
    if (!v.is_string() || v.as_string().empty()) fail(key, "a non-empty string", shown(v));
    return v.as_string();
  }

  const std::string& one_of(std::string_view key, const std::vector<std::string>& names) const {
    const std::string expected = fmt::format("one of {}", fmt::join(names, ", "));
    const Json& v = at(key, expected);
    if (!v.is_string() || std::find(names.begin(), names.end(), v.as_string()) == names.end())
      fail(key, expected, shown(v));
    return v.as_string();
  }

  ImageShape shape(std::string_view key) const {
    const char* expected = "a sample shape CxHxW of positive sizes";
    const std::string& text = string(key);
    int c = 0, h = 0, w = 0;
    char extra = 0;
    if (std::sscanf(text.c_str(), "%dx%dx%d%c", &c, &h, &w, &extra) != 3 || c <= 0 || h <= 0 || w <= 0)
      fail(key, expected, shown(at(key, expected)));
    return {c, h, w};
  }

  void kind(std::string_view key, bool ok, std::string_view expected) const {
    if (!ok) fail(key, expected, shown(at(key, expected)));
  }

  static std::string shown(const Json& v) {
    std::string text = v.dump();
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    return text;
  }

 private:
  const Json& object_;
  std::string prefix_;
  const std::string& source_;
};

std::vector<std::string> zoo_names() {
  std::vector<std::string> names;
  for (const auto& entry : model_zoo()) names.push_back(entry.name);
  return names;
}

void validate_dataset_config(const Json& config, const std::string& source) {
  const MetaChecker c(config, "config.", source);
  const std::string& dataset = c.one_of("dataset", dataset_names());
  c.kind("data_dir", c.at("data_dir", "a string").is_string(), "a string");
  if (config.find("normalize") != nullptr) c.kind("normalize", config.at("normalize").is_bool(), "true or false");
  for (const char* key : {"mean", "std"}) {
    if (const Json* list = config.find(key)) {
      bool ok = list->is_array();
      if (ok) {
        for (const Json& x : list->as_array()) ok = ok && x.is_number() && std::isfinite(x.as_double());
      }
      c.kind(key, ok, "an array of finite numbers");
    }
  }
  if (dataset != "synthetic") return;
  const ImageShape shape = c.shape("synthetic_shape");
  c.integer("synthetic_classes", 1, 256);
  c.integer("synthetic_seed", INT64_MIN, INT64_MAX);
  for (const char* key : {"synthetic_train", "synthetic_test"}) {
    const std::int64_t count = c.integer(key, 1, INT64_MAX);
    // The synthetic set is generated in memory when the checkpoint is used (eval).
    const std::uint64_t bytes = saturating_product({static_cast<std::uint64_t>(count), shape.numel() + 1});
    if (!fits_in_memory(bytes)) {
      c.fail(key, fmt::format("a sample count whose {} data fits in this machine's {}", shape.str(),
                              format_bytes(physical_memory_bytes())),
             fmt::format("{} ({} needed)", count, format_bytes(bytes)));
    }
  }
}

}  // namespace

void validate_checkpoint_meta(const Json& meta, std::size_t params_floats, const std::string& source) {
  if (!meta.is_object()) {
    throw std::runtime_error(fmt::format("{}: meta: expected a JSON object, got {}", source, MetaChecker::shown(meta)));
  }
  const MetaChecker m(meta, "", source);
  const auto version = static_cast<std::int64_t>(Checkpoint::kFormatVersion);
  m.integer("format_version", version, version);
  // A zoo model, or one read from ONNX ("onnx:<name>") whose graph the meta carries.
  if (m.string("model").rfind("onnx:", 0) == 0)
    m.kind("model_graph", m.at("model_graph", "the model's ONNX graph in base64").is_string(),
           "the model's ONNX graph in base64");
  else
    m.one_of("model", zoo_names());
  m.string("signature");
  m.shape("input_shape");
  m.integer("classes", 1, kMaxClasses);
  const auto floats = static_cast<std::int64_t>(params_floats);
  m.integer("num_params", floats, floats);
  m.integer("world_size", 1, kMaxRanks);
  m.integer("batch_size", 1, INT_MAX);
  const std::int64_t global_step = m.integer("global_step", 0, kMaxSteps);
  // epoch and step_in_epoch become ints; a position inside an epoch is never past the
  // steps taken in total.
  m.integer("epoch", 0, INT_MAX - 1);
  m.integer("step_in_epoch", 0, std::min<std::int64_t>(global_step, INT_MAX));
  for (const char* key : {"elapsed_s", "epoch_loss_sum", "epoch_correct", "epoch_count", "epoch_seconds"})
    m.number(key, 0.0);
  m.integer("seed", INT64_MIN, INT64_MAX);
  m.one_of("optimizer", Optimizer::known_names());
  m.integer("optimizer_steps", 0, kMaxSteps);
  m.kind("config", m.at("config", "an object").is_object(), "an object");
  validate_dataset_config(meta.at("config"), source);
}

DatasetConfig dataset_config_of(const Json& meta) {
  DatasetConfig d;
  const Json& c = meta.at("config");
  d.name = c.at("dataset").as_string();
  d.data_dir = c.at("data_dir").as_string();
  if (const Json* n = c.find("normalize")) d.normalize = n->as_bool();
  if (const Json* m = c.find("mean")) {
    for (const Json& v : m->as_array()) d.norm_mean.push_back(static_cast<float>(v.as_double()));
  }
  if (const Json* sd = c.find("std")) {
    for (const Json& v : sd->as_array()) d.norm_std.push_back(static_cast<float>(v.as_double()));
  }
  if (const Json* crop = c.find("crop")) {  // --dataset folder: what evaluation needs to see the same images
    d.crop.size = static_cast<int>(crop->as_int());
    d.channels = static_cast<int>(c.at("channels").as_int());
    d.max_pixels = static_cast<std::uint64_t>(c.at("max_pixels").as_int());
    d.val_fraction = c.at("val_fraction").as_double();
    d.skip_bad_images = c.at("bad_images").as_string() == "skip";
  }
  if (const Json* s = c.find("synthetic_shape")) {
    int ch = 0, h = 0, w = 0;
    if (std::sscanf(s->as_string().c_str(), "%dx%dx%d", &ch, &h, &w) == 3) d.synthetic_shape = {ch, h, w};
    d.synthetic_classes = static_cast<int>(c.at("synthetic_classes").as_int());
    d.synthetic_train = static_cast<std::size_t>(c.at("synthetic_train").as_int());
    d.synthetic_test = static_cast<std::size_t>(c.at("synthetic_test").as_int());
    d.seed = static_cast<std::uint64_t>(c.at("synthetic_seed").as_int());
  }
  return d;
}

}  // namespace ringtrain
