// ringtrain pack's flags and its one call.
#include "PackCommand.h"

#include <cmath>

#include <fmt/format.h>

#include "FlagRange.h"

namespace ringtrain {

PackCommand::PackCommand(CLI::App& app) {
  sub_ = app.add_subcommand("pack",
                            "Write a data set (an image folder, fashion-mnist, mnist, cifar10, svhn) as packed shards "
                            "for --dataset packed: an index and checksummed records, JPEG or raw pixels");
  data_options_.add(*sub_, data_);
  sub_->add_option("--out", options_.out, "Output directory (new or empty; see --overwrite)")->required();
  sub_->add_option("--max-side", options_.max_side,
                   "Resize so the longer side is at most this many pixels (0: keep the sizes)")
      ->capture_default_str()
      ->check(at_least(0));
  sub_->add_option("--quality", options_.quality, "JPEG quality of re-encoded images")
      ->capture_default_str()
      ->check(from_to(1, 100));
  sub_->add_flag("--raw", options_.raw, "Store raw 8-bit pixels instead of JPEG (exact, larger)");
  sub_->add_option("--shard-mb", shard_mb_, "Largest shard file, in MB (a larger image gets a shard of its own)")
      ->capture_default_str()
      ->check(at_least(0.001));
  sub_->add_flag("--overwrite", options_.overwrite, "Replace the packed files of a non-empty --out");
}

int PackCommand::run() {
  const DatasetConfig config = data_options_.resolve();
  options_.shard_bytes = static_cast<std::uint64_t>(std::llround(shard_mb_ * 1e6));
  const PackResult r = pack_dataset(config, options_, [](const std::string& split, std::size_t records) {
    fmt::print("{}: {} records\n", split, records);
    std::fflush(stdout);
  });
  fmt::print("wrote {}: {} training and {} validation records in {} shards, {:.1f} MB ({})\n", options_.out, r.train,
             r.val, r.shards, static_cast<double>(r.bytes) / 1e6,
             options_.raw ? "raw pixels" : fmt::format("JPEG quality {}", options_.quality));
  if (!r.skipped.empty()) {
    fmt::print("skipped {} unreadable image(s) (--bad-images skip):\n", r.skipped.size());
    for (const std::string& s : r.skipped) fmt::print("  {}\n", s);
  }
  return 0;
}

}  // namespace ringtrain
