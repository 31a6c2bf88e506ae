// SnapshotWriter's replication to the next node: digests to the previous node, compared
// on the snapshot thread, and the whole copies that a difference calls for (SnapshotWriter.h).
//
// Replication: losing any one node must leave its snapshot on the survivors, so each node's
// snapshot of a step needs a copy on the next node (node order, wrapping). In a synchronous
// run the next node's own snapshot of that step already is one: the all-reduce leaves every
// rank with the same parameters and optimizer state, bit for bit, and a snapshot's buffers
// are the same on every node too (their mean over the ranks, or each logical shard's). So a
// leader does not send its 2 x parameters' bytes over the link the all-reduce fills (mlp: 12
// MB per snapshot, a fifth of ten steps' ring traffic at np 2); it sends the previous node a
// SnapshotDigest of its own snapshot (the step and the CRC32s of the sealed parameters,
// buffers and optimizer state, and of the metadata's training position without the per-node
// wall-clock times and paths: SnapshotDigest.h), or a digest saying it has none of that step
// (skipped while busy, or not written). The previous node compares it on its snapshot thread
// with its own digest of the step: equal, and its snapshot counts as replicated
// (Stats::replicated); different or missing, and it sends its own snapshot file whole, as
// every snapshot went before, which the next node checks (every CRC) and keeps as its copy
// (from-node-<j>/). Either way the next node holds, complete and checksummed, a snapshot
// with this node's training state of that step, so resuming from it ends with the same bits.
// A digest is 40 bytes; a CRC32 match stands for equal bytes (sections that differ by a
// fault are caught with probability 1 - 2^-32 each).
#include "checkpoint/SnapshotWriter.h"

#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "checkpoint/SnapshotStore.h"

namespace ringtrain {
namespace {

// Whole snapshots travel to the next node, digests to the previous one (SnapshotWriter.h).
constexpr int kTagSnapshot = 1;    // a serialised snapshot
constexpr int kTagEnd = 2;         // no more snapshots from this sender (finish())
constexpr int kTagDigest = 3;      // a SnapshotDigest of the sender's own snapshot of a step
constexpr int kTagDigestEnd = 4;   // no more digests from this sender (finish())

// This node's own digests kept to compare the next node's with (those come within a
// snapshot or two of their step).
constexpr std::size_t kDigestHistory = 8;

}  // namespace

void SnapshotWriter::record_own_digest(const SnapshotDigest& digest) {
  own_digests_.push_back(digest);
  if (own_digests_.size() > kDigestHistory) own_digests_.pop_front();
  digests_out_.push_back(digest);
}

void SnapshotWriter::compare_with_next(const SnapshotDigest& next) {
  std::optional<SnapshotDigest> own;
  {
    std::lock_guard lock(mutex_);
    for (const SnapshotDigest& d : own_digests_) {
      if (d.step == next.step) own = d;
    }
    if (!own || !own->held) return;  // nothing of this node's at that step to replicate
    if (own->same_state(next)) {     // the next node's own snapshot is the copy
      ++stats_.replicated;
      return;
    }
  }
  // The next node holds other bytes, or none of that step: this node's snapshot goes whole
  // (its file is kept until two newer ones are committed, and only this thread commits).
  const std::filesystem::path path = own_slots_->dir() / snapshot_file_name(next.step);
  try {
    std::vector<std::byte> bytes = Checkpoint::read_file(path);
    std::lock_guard lock(mutex_);
    outgoing_.swap(bytes);  // a newer one replaces one not yet sent
  } catch (const std::exception& e) {
    warn_(fmt::format("snapshot at step {} not sent to the next node, whose own differs ({})", next.step, e.what()));
  }
}

void SnapshotWriter::write_received(const std::vector<std::byte>& bytes, int from) {
  const std::filesystem::path dir = snapshot_peer_dir(own_dir(), from);
  bool ok = true;
  try {
    const Json meta = Checkpoint::verify(bytes, (dir / "received").string());  // every CRC
    const std::span<std::byte> file = peer_slots_->open(bytes.size());
    std::memcpy(file.data(), bytes.data(), bytes.size());
    peer_slots_->commit(meta.at("global_step").as_int());
    prepare_next(*peer_slots_, bytes.size());
  } catch (const std::exception& e) {
    ok = false;
    peer_slots_->abandon();
    warn_(fmt::format("copy of node {}'s snapshot not written ({}); the previous one stays", from, e.what()));
  }
  std::lock_guard lock(mutex_);
  (ok ? stats_.received : stats_.failed) += 1;
}

void SnapshotWriter::progress() {
  if (!exchanges_) return;
  progress_digests();
  progress_send();
  progress_receive();
}

void SnapshotWriter::progress_digests() {
  if (!peer_->test(&digest_request_)) return;
  SnapshotDigest digest;
  {
    std::lock_guard lock(mutex_);
    if (digests_out_.empty()) return;
    digest = digests_out_.front();
    digests_out_.pop_front();
  }
  const auto bytes = digest.encode();
  digest_sending_.assign(bytes.begin(), bytes.end());
  digest_request_ = peer_->isend(digest_sending_, previous_leader_, kTagDigest);
}

void SnapshotWriter::progress_send() {
  if (!peer_->test(&send_request_)) return;
  std::lock_guard lock(mutex_);
  if (outgoing_.empty()) return;
  sending_.swap(outgoing_);
  outgoing_.clear();
  send_request_ = peer_->isend(sending_, next_leader_, kTagSnapshot);
  ++stats_.sent;
}

bool SnapshotWriter::receive_small(const PeerChannel::Arrival& arrival) {
  switch (arrival.tag) {
    case kTagEnd:
      peer_->receive(arrival, {});
      end_received_ = true;
      return true;
    case kTagDigestEnd:
      peer_->receive(arrival, {});
      digests_end_received_ = true;
      return true;
    case kTagDigest: {
      std::vector<std::byte> bytes(arrival.bytes);
      peer_->receive(arrival, bytes);
      const SnapshotDigest next = SnapshotDigest::decode(bytes);
      post([this, next] { compare_with_next(next); });  // after this node's own of that step
      return true;
    }
    default:
      return false;
  }
}

void SnapshotWriter::progress_receive() {
  if (receive_request_ != MPI_REQUEST_NULL) {
    if (!peer_->test(&receive_request_)) return;
    // Checked (every CRC) and written on the snapshot thread, which then hands the buffer
    // back for a later copy.
    auto bytes = std::make_shared<std::vector<std::byte>>(std::move(receiving_));
    receiving_ = {};
    const int from = (place_.node + place_.nodes - 1) % place_.nodes;
    post([this, bytes, from] {
      write_received(*bytes, from);
      std::lock_guard lock(mutex_);
      spare_received_.push_back(std::move(*bytes));
    });
  }
  std::optional<PeerChannel::Arrival> arrival;
  do {
    arrival = peer_->probe();
    if (!arrival) return;
  } while (receive_small(*arrival));
  // A whole snapshot. A buffer a received copy was written from, if the snapshot thread is
  // done with one: the copies of a run have one size (SnapshotWriter.h), so after the first
  // two copies no receive allocates or zeroes memory.
  {
    std::lock_guard lock(mutex_);
    if (!spare_received_.empty()) {
      receiving_ = std::move(spare_received_.back());
      spare_received_.pop_back();
    }
  }
  receiving_.resize(arrival->bytes);
  receive_request_ = peer_->ireceive(*arrival, receiving_);
}

bool SnapshotWriter::finish_round() {
  progress_digests();
  bool digests_left = false, copies_left = false;
  {
    std::lock_guard lock(mutex_);
    digests_left = !digests_out_.empty();
    copies_left = !outgoing_.empty() || pending_ > 0;  // a comparison may still ask for one
  }
  if (!digests_left && digest_request_ == MPI_REQUEST_NULL && !digests_end_sent_) {
    digest_request_ = peer_->isend({}, previous_leader_, kTagDigestEnd);
    digests_end_sent_ = true;
  }
  progress_send();
  // Every whole copy the next node's digests call for is known once they have ended (they
  // come in order, before their end) and the snapshot thread has compared them all.
  if (digests_end_received_ && !copies_left && send_request_ == MPI_REQUEST_NULL && !end_sent_) {
    send_request_ = peer_->isend({}, next_leader_, kTagEnd);
    end_sent_ = true;
  }
  if (!end_received_ || !digests_end_received_ || receive_request_ != MPI_REQUEST_NULL) progress_receive();
  return digests_end_sent_ && peer_->test(&digest_request_) && end_sent_ && peer_->test(&send_request_) &&
         end_received_ && digests_end_received_ && receive_request_ == MPI_REQUEST_NULL;
}

void SnapshotWriter::finish() {
  wait_idle();  // every own snapshot written, its digest queued
  if (!exchanges_) return;
  for (int idle = 0; !finish_round(); ++idle) PeerChannel::back_off(idle);
  wait_idle();  // the copies received written
}

}  // namespace ringtrain
