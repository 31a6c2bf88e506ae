// The TCP pieces of the stall watchdog's side channel (StallChannel.h), outside MPI: this
// host's IPv4 interfaces, the choice of the address a rank reaches rank 0 at, a listening
// socket, a connect with a deadline, and a framed non-blocking connection. Frames are
// (u32 type, u32 length, payload), little-endian; a connection that sends anything else is
// closed by its reader.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ringtrain {

struct Interface {
  std::string name;
  std::uint32_t address = 0;  // host byte order
  int prefix = 32;
  bool loopback = false;
};

// The IPv4 interfaces that are up; "name/a.b.c.d/prefix;..." is how they travel over MPI.
std::vector<Interface> local_interfaces();
std::string format_interfaces(const std::vector<Interface>& interfaces);
std::vector<Interface> parse_interfaces(const std::string& text);
std::string format_ipv4(std::uint32_t address);
std::optional<std::uint32_t> parse_ipv4(const std::string& text);

// Rank 0's interfaces that Open MPI's TCP transport may use (OMPI_MCA_btl_tcp_if_include /
// _exclude: interface names or CIDR ranges, comma-separated), loopback left out.
std::vector<Interface> mpi_interfaces(const std::vector<Interface>& all, const char* include, const char* exclude);

// The address of `hub` (its candidates, in order) that a rank with interfaces `rank`
// reaches: the first in a subnet the rank has an interface on, else the first.
std::optional<std::uint32_t> reachable_address(const std::vector<Interface>& hub, const std::vector<Interface>& rank);

// A listening socket on address:0 (an ephemeral port); returns (fd, port) or throws
// std::runtime_error naming the address.
std::pair<int, int> listen_on(std::uint32_t address);
// A connected non-blocking socket, or -1 after `timeout`.
int connect_to(std::uint32_t address, int port, std::chrono::milliseconds timeout);
void close_fd(int& fd) noexcept;

// One framed connection, non-blocking both ways.
class FramedSocket {
 public:
  static constexpr std::size_t kHeaderBytes = 8;

  explicit FramedSocket(int fd = -1) : fd_(fd) {}
  ~FramedSocket() { close_fd(fd_); }
  FramedSocket(FramedSocket&& other) noexcept;
  FramedSocket& operator=(FramedSocket&& other) noexcept;
  FramedSocket(const FramedSocket&) = delete;
  FramedSocket& operator=(const FramedSocket&) = delete;

  int fd() const noexcept { return fd_; }
  bool open() const noexcept { return fd_ >= 0; }
  void close() noexcept { close_fd(fd_); }

  // Queues a frame unless an earlier one is still going out (news that cannot leave is
  // replaced by the next poll's: a peer that does not read never makes this grow), then
  // sends what the socket takes. Closes on an error.
  void send_latest(std::uint32_t type, std::span<const std::byte> payload);
  // Reads what is there; closes on EOF or error.
  void receive();
  // The next whole frame's (type, payload) if one is in; `max_payload` bounds what a
  // frame may claim (more: the connection is closed).
  std::optional<std::pair<std::uint32_t, std::vector<std::byte>>> next_frame(std::size_t max_payload);

 private:
  void flush();

  int fd_ = -1;
  std::vector<std::byte> in_;
  std::vector<std::byte> out_;
};

}  // namespace ringtrain
