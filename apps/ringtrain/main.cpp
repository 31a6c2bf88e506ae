// ringtrain command-line entry point (placeholder until the trainer lands).
#include <cstdio>
int main() {
  std::puts("ringtrain: not built yet");
  return 1;
}
