// NetworkSimulator: ranks advance one operation at a time in order of their clocks, so link
// reservations are made in the order of the times they are asked for.
//
// Transfers: a network message of b bytes from node A to node B occupies A's outgoing and
// B's incoming link for b * beta from the later of its ready time and both links' free
// times, and arrives alpha + delay after that (the latency overlaps the next transfer, as
// the ring's pipelined chunks do). Eager (b <= eager limit): ready when sent; the send
// completes when its bytes have left. Rendezvous: the sender's request-to-send reaches the
// receiver after one latency, the receiver answers once its receive is posted, and the
// data leaves one latency later, at the rendezvous rate only when its handshake is exposed
// behind reverse traffic (handshake_exposed below), else at beta. Between ranks of one node a
// message is a copy through the sender's and receiver's memory (shm_beta, shm_alpha).
// Collectives inside an algorithm (hier's node barrier) complete ceil(log2 k) latencies
// after the last member arrives; a SharedCounter wait completes when the awaited store ran.
#include "collectives/sim/NetworkSimulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace ringtrain::sim {
namespace {

constexpr double kUnknown = -1.0;

class Simulation {
 public:
  Simulation(const Schedule& s, const NetworkParams& p) : s_(s), p_(p) {
    const std::size_t ranks = static_cast<std::size_t>(s.ranks);
    const std::size_t nodes = static_cast<std::size_t>(s.node_of(s.ranks - 1) + 1);
    pc_.assign(ranks, 0);
    clock_.assign(ranks, 0.0);
    out_free_.assign(nodes, 0.0);
    in_free_.assign(nodes, 0.0);
    shm_out_.assign(ranks, 0.0);
    shm_in_.assign(ranks, 0.0);
    sending_until_.assign(ranks, 0.0);
    request_done_.assign(s.requests.size(), kUnknown);
    send_post_.assign(s.messages.size(), kUnknown);
    recv_post_.assign(s.messages.size(), kUnknown);
    arrival_.assign(s.messages.size(), kUnknown);
    coll_arrived_.assign(s.collectives.size(), 0);
    coll_latest_.assign(s.collectives.size(), 0.0);
    signal_time_.assign(s.signals, kUnknown);
  }

  SimResult run() {
    for (int r = 0; r < s_.ranks; ++r) queue_.push({0.0, r});
    while (!queue_.empty()) {
      const auto [t, rank] = queue_.top();
      queue_.pop();
      if (step(rank)) queue_.push({clock_[rank], rank});
    }
    SimResult result = result_;
    for (int r = 0; r < s_.ranks; ++r) {
      if (pc_[r] < s_.ops[r].size())
        throw std::runtime_error("simulator: rank " + std::to_string(r) + " never finished its schedule (op " +
                                 std::to_string(pc_[r]) + ")");
      result.seconds = std::max(result.seconds, clock_[r]);
    }
    return result;
  }

 private:
  using Entry = std::pair<double, int>;

  double bytes(std::uint64_t recorded) const { return static_cast<double>(recorded) * s_.byte_scale; }
  bool same_node(const Message& m) const { return s_.node_of(m.src) == s_.node_of(m.dst); }
  double latency() const { return p_.alpha_s + p_.delay_s; }
  // One TCP connection per ordered pair of ranks (Open MPI's btl_tcp_links 1).
  static std::uint64_t connection(int src, int dst) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) | static_cast<std::uint32_t>(dst);
  }

  // Executes rank's next operation; false when it blocks or has finished.
  bool step(int rank) {
    if (pc_[rank] >= s_.ops[rank].size()) return false;
    const Op& op = s_.ops[rank][pc_[rank]];
    double& clock = clock_[rank];
    switch (op.kind) {
      case OpKind::kSend: {
        const std::uint64_t m = s_.requests[op.id].index;
        send_post_[m] = clock;
        try_transfer(m);
        break;
      }
      case OpKind::kRecv: {
        const std::uint64_t m = s_.requests[op.id].index;
        if (m == kNoRequest) throw std::runtime_error("simulator: a receive that no message matched");
        recv_post_[m] = clock;
        try_transfer(m);
        break;
      }
      case OpKind::kWait:
        if (!wait_for(rank, request_done_[op.id], waiters_, op.id)) return false;
        break;
      case OpKind::kAwait:
        if (!wait_for(rank, signal_time_[op.id], signal_waiters_, op.id)) return false;
        break;
      case OpKind::kReduce: clock += bytes(op.bytes) * p_.gamma_s_per_byte; break;
      case OpKind::kCopy: clock += bytes(op.bytes) * p_.shm_beta_s_per_byte; break;
      case OpKind::kCollective: arrive(s_.requests[op.id].index, clock); break;
      case OpKind::kSignal:
        signal_time_[op.id] = clock;
        release(signal_waiters_, op.id, clock);
        break;
    }
    ++pc_[rank];
    return pc_[rank] < s_.ops[rank].size();
  }

  // True (and the clock advanced) when `done` is known; else the rank waits in `waiters`.
  template <class Map>
  bool wait_for(int rank, double done, Map& waiters, std::uint64_t id) {
    if (done == kUnknown) {
      waiters[id].push_back(rank);
      return false;
    }
    clock_[rank] = std::max(clock_[rank], done);
    return true;
  }

  template <class Map>
  void release(Map& waiters, std::uint64_t id, double /*time*/) {
    const auto it = waiters.find(id);
    if (it == waiters.end()) return;
    for (int rank : it->second) queue_.push({clock_[rank], rank});
    waiters.erase(it);
  }

  void complete(std::uint64_t request, double time) {
    if (request == kNoRequest) return;
    request_done_[request] = time;
    release(waiters_, request, time);
  }

  // Reserves [start, start + b * beta) on A's outgoing and B's incoming link.
  double reserve(double& out, double& in, double ready, double duration) {
    const double start = std::max({ready, out, in});
    out = in = start + duration;
    return start + duration;
  }

  void try_transfer(std::uint64_t m) {
    const Message& msg = s_.messages[m];
    if (send_post_[m] == kUnknown || arrival_[m] != kUnknown) {
      finish_receive(m);
      return;
    }
    const double b = bytes(msg.bytes);
    double finish = 0.0;
    if (same_node(msg)) {
      finish = reserve(shm_out_[msg.src], shm_in_[msg.dst], send_post_[m], b * p_.shm_beta_s_per_byte);
      arrival_[m] = finish + p_.shm_alpha_s;
      ++result_.shm_messages;
    } else {
      const bool eager = b <= p_.eager_limit_bytes;
      if (!eager && recv_post_[m] == kUnknown) return;  // rendezvous waits for the receive
      finish = network_transfer(m, b, eager);
      arrival_[m] = finish + latency();
      ++result_.network_messages;
      result_.network_bytes += static_cast<std::uint64_t>(b);
    }
    complete(msg.send_request, finish);
    finish_receive(m);
  }

  // Reserves A's outgoing and B's incoming link for message m; returns when its bytes have left.
  double network_transfer(std::uint64_t m, double b, bool eager) {
    const Message& msg = s_.messages[m];
    double& out = out_free_[s_.node_of(msg.src)];
    double& in = in_free_[s_.node_of(msg.dst)];
    const double ready = eager ? send_post_[m] : std::max(send_post_[m] + latency(), recv_post_[m]) + latency();
    const double start = std::max({ready, out, in});
    const bool slowed = !eager && handshake_exposed(msg, ready, start, b);
    const double finish = start + b * (slowed ? p_.rendezvous_beta_s_per_byte : p_.beta_s_per_byte);
    out = in = finish;
    last_transfer_[connection(msg.src, msg.dst)] = {start, finish};
    sending_until_[msg.src] = std::max(sending_until_[msg.src], finish);
    return finish;
  }

  // The rendezvous rate stands for the link idling while the receiver's clear-to-send
  // queues behind bulk data it sends back to the sender on the same TCP connection
  // (allreduce-np2-investigation.md; rd's exchanges on 2 nodes: 11.9-15.6 ns/B). It applies
  // only when both hold:
  // - exposed: the sending rank has no earlier network data still leaving when this
  //   message's handshake completes. A rank with several messages in flight (ps's workers
  //   post every push at once; the server sends every worker its sum) keeps sending while
  //   a handshake waits, so the wait costs no link time;
  // - behind reverse traffic: the receiver's last message to the sender on this connection
  //   is still to leave when this message's handshake completes and starts before this
  //   message would end (an exchange, as rd's rounds; judged from the handshake, not from
  //   where the link queue puts the two, so a node's concurrent exchanges all pay it). A
  //   one-way message (ps's push and pull of a single chunk, rd's fold) has its
  //   clear-to-send answered at once.
  // Otherwise the bytes move at the link's rate: in the 2-4 node record ps moves its
  // (p-1) n bytes each way through rank 0's link at 8.1-8.8 ns/B at 64-256 MiB, both
  // directions at once, in 1 MiB rendezvous messages (allreduce-sim-calibration.md).
  bool handshake_exposed(const Message& msg, double ready, double start, double b) const {
    if (sending_until_[msg.src] > ready) return false;
    const auto it = last_transfer_.find(connection(msg.dst, msg.src));
    if (it == last_transfer_.end()) return false;
    return it->second.finish > ready && it->second.start < start + b * p_.beta_s_per_byte;
  }

  void finish_receive(std::uint64_t m) {
    const Message& msg = s_.messages[m];
    if (arrival_[m] == kUnknown || recv_post_[m] == kUnknown) return;
    if (request_done_[msg.recv_request] != kUnknown) return;
    complete(msg.recv_request, std::max(arrival_[m], recv_post_[m]));
  }

  void arrive(std::uint64_t c, double time) {
    const CollectiveCall& call = s_.collectives[c];
    coll_latest_[c] = std::max(coll_latest_[c], time);
    if (++coll_arrived_[c] < call.members.size()) return;
    bool network = false;
    for (int member : call.members) network = network || s_.node_of(member) != s_.node_of(call.members[0]);
    const double rounds = std::ceil(std::log2(static_cast<double>(call.members.size())));
    const double done = coll_latest_[c] + rounds * (network ? latency() : p_.shm_alpha_s);
    for (std::uint64_t request : call.requests) complete(request, done);
  }

  const Schedule& s_;
  NetworkParams p_;
  std::vector<std::size_t> pc_;
  std::vector<double> clock_;
  std::vector<double> out_free_, in_free_, shm_out_, shm_in_;
  std::vector<double> sending_until_;  // per rank: when its last network message's bytes have left
  struct Interval {
    double start = 0.0;
    double finish = 0.0;
  };
  std::unordered_map<std::uint64_t, Interval> last_transfer_;  // per connection: its last network message
  std::vector<double> request_done_, send_post_, recv_post_, arrival_;
  std::vector<std::size_t> coll_arrived_;
  std::vector<double> coll_latest_;
  std::vector<double> signal_time_;
  std::unordered_map<std::uint64_t, std::vector<int>> waiters_, signal_waiters_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_;
  SimResult result_;
};

}  // namespace

NetworkParams NetworkParams::from_cost_model(const AllreduceCostModel& model) {
  NetworkParams p;
  p.alpha_s = model.alpha_s;
  p.beta_s_per_byte = model.beta_s_per_byte;
  p.rendezvous_beta_s_per_byte = model.rendezvous_beta_s_per_byte;
  p.gamma_s_per_byte = model.gamma_s_per_byte;
  p.eager_limit_bytes = model.eager_limit_bytes;
  return p;
}

SimResult simulate(const Schedule& schedule, const NetworkParams& params) {
  return Simulation(schedule, params).run();
}

}  // namespace ringtrain::sim
