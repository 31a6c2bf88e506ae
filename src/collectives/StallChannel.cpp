// StallChannel: set-up over MPI, then the hub's and the members' polls (StallChannel.h).
#include "collectives/StallChannel.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>

#include <fmt/format.h>

#include "common/LittleEndian.h"

namespace ringtrain {
namespace {

constexpr std::uint32_t kHello = 0x52545748;  // "HWTR": token, rank, size
constexpr std::uint32_t kStatus = 2;          // one StallStatus
constexpr std::uint32_t kTable = 3;           // the hub's status and the ranks that stand still
constexpr std::size_t kHelloBytes = StallChannel::kTokenBytes + 8;
constexpr std::size_t kEntryBytes = 12 + StallStatus::kWireBytes;  // rank, silent ms, exited, status
constexpr std::size_t kMaxPending = 64;
constexpr auto kHelloTimeout = std::chrono::seconds(5);
constexpr auto kConnectTimeout = std::chrono::milliseconds(5000);

void put_status(std::vector<std::byte>& out, const StallStatus& s) {
  const std::size_t at = out.size();
  out.resize(at + StallStatus::kWireBytes);
  s.encode(std::span<std::byte, StallStatus::kWireBytes>(out.data() + at, StallStatus::kWireBytes));
}
StallStatus get_status(const std::byte* p) {
  return StallStatus::decode(std::span<const std::byte, StallStatus::kWireBytes>(p, StallStatus::kWireBytes));
}
double seconds(StallChannel::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string broadcast_text(Communicator& comm, std::string text) {
  std::uint64_t size = text.size();
  comm.broadcast(std::as_writable_bytes(std::span(&size, 1)), 0);
  text.resize(size);
  if (size > 0) comm.broadcast(std::as_writable_bytes(std::span(text.data(), text.size())), 0);
  return text;
}

std::array<std::byte, StallChannel::kTokenBytes> random_token() {
  std::array<std::byte, StallChannel::kTokenBytes> token{};
  std::ifstream in("/dev/urandom", std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(token.data()), token.size())) {
    std::random_device device;
    for (auto& b : token) b = static_cast<std::byte>(device());
  }
  return token;
}

// Rank 0's plan, one line each: "ok", the token in hex, then per rank "address port"
// (rank 0: "- 0"); or "off"/"error" and why.
std::string make_plan(const StallChannelOptions& options, const std::vector<std::string>& hosts,
                      const std::vector<std::string>& interfaces, std::vector<int>& listeners,
                      std::vector<std::pair<std::uint32_t, int>>& ports,
                      std::array<std::byte, StallChannel::kTokenBytes>& token) {
  const auto mine = parse_interfaces(interfaces[0]);
  std::vector<std::uint32_t> target(hosts.size(), 0);
  if (options.listen != "auto") {
    std::optional<std::uint32_t> address = parse_ipv4(options.listen);
    for (const Interface& i : mine)
      if (!address && i.name == options.listen) address = i.address;
    if (!address)
      return fmt::format("error\n--stall-channel '{}': not an IPv4 address nor an interface of rank 0's host {} "
                         "(expected auto, off, an address or an interface name)",
                         options.listen, hosts[0]);
    std::fill(target.begin() + 1, target.end(), *address);
  } else {
    const auto candidates = mpi_interfaces(mine, std::getenv("OMPI_MCA_btl_tcp_if_include"),
                                           std::getenv("OMPI_MCA_btl_tcp_if_exclude"));
    for (std::size_t r = 1; r < hosts.size(); ++r) {
      if (hosts[r] == hosts[0] && interfaces[r] == interfaces[0]) {
        target[r] = 0x7f000001U;  // the same host and network: loopback
        continue;
      }
      const auto address = reachable_address(candidates, parse_interfaces(interfaces[r]));
      if (!address) return fmt::format("off\nrank 0's host {} has no network interface that rank {} ({}) can reach", hosts[0], r, hosts[r]);
      target[r] = *address;
    }
  }
  std::string plan = "ok\n";
  token = random_token();
  for (std::byte b : token) plan += fmt::format("{:02x}", static_cast<unsigned>(b));
  plan += "\n- 0\n";
  for (std::size_t r = 1; r < hosts.size(); ++r) {
    auto it = std::find_if(ports.begin(), ports.end(), [&](const auto& p) { return p.first == target[r]; });
    if (it == ports.end()) {
      try {
        const auto [fd, port] = listen_on(target[r]);
        listeners.push_back(fd);
        ports.emplace_back(target[r], port);
        it = ports.end() - 1;
      } catch (const std::runtime_error& e) {
        return std::string("off\n") + e.what();
      }
    }
    plan += fmt::format("{} {}\n", format_ipv4(it->first), it->second);
  }
  return plan;
}

}  // namespace

StallChannel::StallChannel(Communicator& comm, const StallChannelOptions& options)
    : rank_(comm.rank()), size_(comm.size()), opened_(Clock::now()) {
  if (size_ > 1) set_up(comm, options);
}

StallChannel::~StallChannel() {
  for (int& fd : listeners_) close_fd(fd);
}

void StallChannel::set_up(Communicator& comm, const StallChannelOptions& options) {
  hosts_ = comm.allgather(comm.host_name());
  const auto interfaces = comm.allgather(format_interfaces(local_interfaces()));
  std::string plan;
  if (rank_ == 0) {
    plan = options.listen == "off" ? std::string("off\n--stall-channel off")
                                   : make_plan(options, hosts_, interfaces, listeners_, listening_, token_);
  }
  plan = broadcast_text(comm, plan);
  std::istringstream in(plan);
  std::string status, line;
  std::getline(in, status);
  if (status != "ok") {
    std::getline(in, note_);
    for (int& fd : listeners_) close_fd(fd);
    if (status == "error") throw std::invalid_argument(note_);
    return;
  }
  std::string hex;
  std::getline(in, hex);
  for (std::size_t i = 0; i < kTokenBytes; ++i) token_[i] = static_cast<std::byte>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  std::vector<std::string> targets(static_cast<std::size_t>(size_));
  for (auto& t : targets) std::getline(in, t);
  std::int64_t failed = 0;
  if (rank_ != 0) {
    std::istringstream t(targets[static_cast<std::size_t>(rank_)]);
    std::string address;
    int port = 0;
    t >> address >> port;
    const int fd = connect_to(parse_ipv4(address).value_or(0), port, kConnectTimeout);
    hub_ = FramedSocket(fd);
    std::vector<std::byte> hello(token_.begin(), token_.end());
    append_le32(hello, static_cast<std::uint32_t>(rank_));
    append_le32(hello, static_cast<std::uint32_t>(size_));
    hub_.send_latest(kHello, hello);  // 32 bytes into an empty socket buffer: sent at once
    failed = hub_.open() ? 0 : 1;
    if (failed) note_ = fmt::format("rank {} could not connect to rank 0 at {}", rank_, targets[static_cast<std::size_t>(rank_)]);
  }
  std::vector<std::int64_t> failures{failed};
  comm.allreduce_sum(std::span<std::int64_t>(failures));
  if (failures[0] > 0) {
    if (note_.empty()) note_ = fmt::format("{} rank(s) could not connect to rank 0's side channel", failures[0]);
    hub_.close();
    for (int& fd : listeners_) close_fd(fd);
    return;
  }
  members_.resize(static_cast<std::size_t>(size_));
  heard_.resize(static_cast<std::size_t>(size_));
  opened_ = Clock::now();
  active_ = true;
}

void StallChannel::exchange(const StallStatus& mine, Clock::time_point now, double still_after_s) {
  if (!active_) return;
  if (rank_ == 0) {
    hub_exchange(mine, now, still_after_s);
  } else {
    member_exchange(mine, now);
  }
}

void StallChannel::accept_new(Clock::time_point now) {
  for (int listener : listeners_) {
    while (true) {
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      if (pending_.size() >= kMaxPending) {
        int f = fd;
        close_fd(f);
        continue;
      }
      pending_.push_back(Pending{FramedSocket(fd), now});
    }
  }
}

void StallChannel::check_pending(Clock::time_point now) {
  for (Pending& p : pending_) {
    p.socket.receive();
    const auto frame = p.socket.next_frame(kHelloBytes);
    if (frame) {
      const auto& [type, payload] = *frame;
      const bool ok = type == kHello && payload.size() == kHelloBytes &&
                      std::equal(token_.begin(), token_.end(), payload.begin());
      const std::uint32_t r = ok ? read_le32(payload.data() + kTokenBytes) : 0;
      if (ok && r >= 1 && r < static_cast<std::uint32_t>(size_) && read_le32(payload.data() + kTokenBytes + 4) == static_cast<std::uint32_t>(size_)) {
        members_[r] = std::move(p.socket);
        Heard& h = heard_[r];
        h.heard = true;
        h.at = now;
        h.status.phase = "start";
      }
      p.socket.close();
    } else if (now - p.opened > kHelloTimeout) {
      p.socket.close();
    }
  }
  std::erase_if(pending_, [](const Pending& p) { return !p.socket.open(); });
}

void StallChannel::hub_exchange(const StallStatus& mine, Clock::time_point now, double still_after_s) {
  accept_new(now);
  check_pending(now);
  for (int r = 1; r < size_; ++r) {
    FramedSocket& s = members_[static_cast<std::size_t>(r)];
    if (!s.open()) continue;
    s.receive();
    if (!s.open()) heard_[static_cast<std::size_t>(r)].closed = true;
    while (auto frame = s.next_frame(StallStatus::kWireBytes)) {
      if (frame->first != kStatus || frame->second.size() != StallStatus::kWireBytes) {
        s.close();
        break;
      }
      heard_[static_cast<std::size_t>(r)] = Heard{true, heard_[static_cast<std::size_t>(r)].closed, now,
                                                  get_status(frame->second.data())};
    }
  }
  const std::vector<std::byte> news = table(mine, now, still_after_s);
  for (int r = 1; r < size_; ++r) members_[static_cast<std::size_t>(r)].send_latest(kTable, news);
}

std::vector<std::byte> StallChannel::table(const StallStatus& mine, Clock::time_point now, double still_after_s) const {
  std::vector<std::byte> out;
  append_le32(out, 0);  // the count, set below
  put_status(out, mine);
  std::uint32_t count = 0;
  for (int r = 1; r < size_; ++r) {
    const Heard& h = heard_[static_cast<std::size_t>(r)];
    const double silent = seconds(now - (h.heard ? h.at : opened_));
    if (!h.closed && silent < still_after_s && h.status.still_s + silent < still_after_s) continue;
    append_le32(out, static_cast<std::uint32_t>(r));
    append_le32(out, static_cast<std::uint32_t>(std::min(silent, 4.0e6) * 1000.0));
    append_le32(out, h.closed ? 1U : 0U);
    put_status(out, h.status);
    ++count;
  }
  for (int i = 0; i < 4; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::byte>(count >> (8 * i));
  return out;
}

void StallChannel::member_exchange(const StallStatus& mine, Clock::time_point now) {
  hub_.receive();
  const std::size_t most = 4 + StallStatus::kWireBytes + static_cast<std::size_t>(size_) * kEntryBytes;
  while (auto frame = hub_.next_frame(most)) {
    if (frame->first != kTable) {
      hub_.close();
      break;
    }
    read_table(frame->second, now);
  }
  std::vector<std::byte> out;
  put_status(out, mine);
  hub_.send_latest(kStatus, out);
}

void StallChannel::read_table(const std::vector<std::byte>& payload, Clock::time_point now) {
  if (payload.size() < 4 + StallStatus::kWireBytes) return;
  const std::uint32_t count = read_le32(payload.data());
  if (count >= static_cast<std::uint32_t>(size_) || payload.size() != 4 + StallStatus::kWireBytes + count * kEntryBytes) return;
  hub_heard_ = Heard{true, false, now, get_status(payload.data() + 4)};
  table_.clear();
  const std::byte* p = payload.data() + 4 + StallStatus::kWireBytes;
  for (std::uint32_t i = 0; i < count; ++i, p += kEntryBytes) {
    const int r = static_cast<int>(read_le32(p));
    if (r <= 0 || r >= size_ || r == rank_) continue;
    table_.push_back(
        PeerView{r, hosts_[static_cast<std::size_t>(r)], true, read_le32(p + 4) / 1000.0, get_status(p + 12), read_le32(p + 8) != 0});
  }
  table_at_ = now;
}

StallVerdictInput StallChannel::view(const StallStatus& mine, Clock::time_point now, double silence_s) const {
  StallVerdictInput in;
  in.self = rank_;
  in.mine = mine;
  in.silence_s = silence_s;
  if (!active_) return in;
  // A status `age` seconds old (the status stays as reported: where it was last seen).
  const auto aged = [](PeerView v, double age) {
    v.silent_s += age;
    return v;
  };
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) {
      const Heard& h = heard_[static_cast<std::size_t>(r)];
      in.peers.push_back(aged(PeerView{r, hosts_[static_cast<std::size_t>(r)], h.heard, 0.0, h.status, h.closed},
                              seconds(now - (h.heard ? h.at : opened_))));
    }
    return in;
  }
  const double hub_silent = seconds(now - (hub_heard_.heard ? hub_heard_.at : opened_));
  // A hub whose connection ended has exited (the job is ending), not stalled.
  in.hub = aged(PeerView{0, hosts_[0], hub_heard_.heard, 0.0, hub_heard_.status, !hub_.open()}, hub_silent);
  in.hub_silent = hub_silent >= silence_s;
  in.peers.push_back(in.hub);
  // The others' news came through the hub: once it has ended, or has not been heard from
  // for half the silence, it is stale (an entry's silence would grow by the hub's own, and
  // a live rank would look silent just before the hub does).
  if (in.hub.exited || hub_silent >= silence_s / 2) return in;
  const double since_table = seconds(now - table_at_);
  for (const PeerView& v : table_) {
    in.peers.push_back(aged(v, since_table));
  }
  return in;
}

}  // namespace ringtrain
