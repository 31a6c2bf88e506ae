// DatasetReport: statistics via the Dataset interface (get() in double sums) plus the
// raw uint8 statistics when the dataset is an ImageDataset.
#include "datasets/DatasetReport.h"

#include <cmath>

#include <fmt/format.h>

#include "datasets/ImageDataset.h"

namespace ringtrain {

SplitReport describe_split(const Dataset& dataset) {
  SplitReport r;
  r.count = dataset.size();
  r.shape = dataset.shape();
  r.classes = dataset.classes();
  r.class_names = dataset.class_names();
  r.histogram.assign(static_cast<std::size_t>(r.classes), 0);
  const auto channels = static_cast<std::size_t>(r.shape.channels);
  const std::size_t hw = static_cast<std::size_t>(r.shape.height) * r.shape.width;
  std::vector<double> sum(channels, 0.0), sumsq(channels, 0.0);
  std::vector<float> sample(r.shape.numel());
  for (std::size_t i = 0; i < r.count; ++i) {
    const int label = dataset.label(i);
    if (label >= 0 && label < r.classes) ++r.histogram[static_cast<std::size_t>(label)];
    dataset.get(i, sample.data());
    for (std::size_t c = 0; c < channels; ++c) {
      double s = 0.0, s2 = 0.0;
      for (std::size_t p = 0; p < hw; ++p) {
        const double v = sample[c * hw + p];
        s += v;
        s2 += v * v;
      }
      sum[c] += s;
      sumsq[c] += s2;
    }
  }
  const double n = static_cast<double>(r.count) * static_cast<double>(hw);
  for (std::size_t c = 0; c < channels; ++c) {
    const double mean = n > 0 ? sum[c] / n : 0.0;
    r.mean.push_back(mean);
    r.std.push_back(n > 0 ? std::sqrt(std::max(0.0, sumsq[c] / n - mean * mean)) : 0.0);
  }
  if (const auto* image = dynamic_cast<const ImageDataset*>(&dataset)) {
    const ChannelStats raw = image->channel_stats();
    r.raw_mean = raw.mean;
    r.raw_std = raw.std;
    r.norm_mean = image->norm_mean();
    r.norm_std = image->norm_std();
    r.source = image->source();
  }
  return r;
}

DatasetReport describe_dataset(const std::string& name, const DatasetSplits& splits) {
  DatasetReport report;
  report.name = name;
  if (splits.train) report.train = describe_split(*splits.train);
  if (splits.test) report.test = describe_split(*splits.test);
  return report;
}

namespace {

template <typename T>
std::string join(const std::vector<T>& v) {
  std::string s;
  for (const auto& x : v) { if (!s.empty()) s += " "; s += fmt::format("{:.4f}", x); }
  return s;
}

void format_split(std::string& out, const char* title, const SplitReport& r) {
  out += fmt::format("{}: {} samples of {} (CxHxW), {} classes\n", title, r.count, r.shape.str(), r.classes);
  if (!r.source.empty()) out += fmt::format("  source: {}\n", r.source);
  for (std::size_t k = 0; k < r.histogram.size(); ++k) {
    const double pct = r.count ? 100.0 * static_cast<double>(r.histogram[k]) / static_cast<double>(r.count) : 0.0;
    out += fmt::format("  class {:>3} {:<14} {:>8} ({:5.2f}%)\n", k, k < r.class_names.size() ? r.class_names[k] : "",
                       r.histogram[k], pct);
  }
  if (!r.raw_mean.empty())
    out += fmt::format("  raw pixel (x/255) mean per channel: {}\n  raw pixel (x/255) std  per channel: {}\n",
                       join(r.raw_mean), join(r.raw_std));
  if (!r.norm_mean.empty())
    out += fmt::format("  normalisation (x/255 - mean)/std: mean {} std {}\n", join(r.norm_mean), join(r.norm_std));
  out += fmt::format("  normalised mean per channel: {}\n  normalised std  per channel: {}\n", join(r.mean), join(r.std));
}

}  // namespace

std::string format_dataset_report(const DatasetReport& report) {
  std::string out = fmt::format("dataset {}\n", report.name);
  format_split(out, "train", report.train);
  format_split(out, "test", report.test);
  return out;
}

}  // namespace ringtrain
