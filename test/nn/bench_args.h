// The hand-run nn benches' command line: groups of four positive numbers (a shape each) and
// --repeats R. Returns false (after printing usage to stderr) on anything else.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ringtrain::test {

inline bool parse_bench_args(int argc, char** argv, const char* usage, std::vector<long>& numbers, int& repeats) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
      repeats = std::max(1, std::atoi(argv[++i]));
    else
      numbers.push_back(std::atol(argv[i]));
  }
  if (numbers.size() % 4 == 0 && std::none_of(numbers.begin(), numbers.end(), [](long v) { return v <= 0; }))
    return true;
  std::fprintf(stderr, "usage: %s\n", usage);
  return false;
}

}  // namespace ringtrain::test
