// Copies that write around the cache (non-temporal stores): a RAM snapshot's capture of the
// state from inside the optimizer update (SnapshotWriter::capture) writes 8 bytes per
// parameter into a file that nothing reads back soon, and ordinary stores would first read
// every destination line into the cache (a read for ownership) and evict the step's own
// working set to make room.
#pragma once

#include <cstddef>

namespace ringtrain {

// dst[0, bytes) = src[0, bytes), any alignment; the whole 16-byte pieces of dst with
// streaming stores where the CPU has them (SSE2), else memcpy. Call stream_fence() before
// another thread reads dst.
void stream_copy(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept;
// dst[0, bytes) = 0 with streaming stores (as stream_copy).
void stream_zero(std::byte* dst, std::size_t bytes) noexcept;
// Orders the streaming stores before every later store (sfence): the release that hands
// the copy to another thread then covers them.
void stream_fence() noexcept;

}  // namespace ringtrain
