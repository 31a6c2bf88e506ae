// Sockets for the stall side channel: plain POSIX, IPv4, non-blocking, never SIGPIPE.
#include "collectives/SideSocket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

#include <fmt/format.h>

#include "common/LittleEndian.h"

namespace ringtrain {
namespace {

std::uint32_t mask(int prefix) { return prefix <= 0 ? 0U : prefix >= 32 ? 0xffffffffU : ~((1U << (32 - prefix)) - 1U); }

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(sep, start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Open MPI's if_include/if_exclude entry: an interface name or a CIDR range.
bool matches(const Interface& i, const std::string& entry) {
  const auto slash = entry.find('/');
  if (slash == std::string::npos) return i.name == entry;
  const auto net = parse_ipv4(entry.substr(0, slash));
  const int prefix = std::atoi(entry.c_str() + slash + 1);
  return net && (i.address & mask(prefix)) == (*net & mask(prefix));
}

sockaddr_in socket_address(std::uint32_t address, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(address);
  return a;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

}  // namespace

std::vector<Interface> local_interfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    Interface f;
    f.name = i->ifa_name;
    f.address = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    if (i->ifa_netmask != nullptr) {
      const std::uint32_t m = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
      f.prefix = __builtin_popcount(m);
    }
    f.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(f);
  }
  ::freeifaddrs(list);
  return out;
}

std::string format_ipv4(std::uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

std::optional<std::uint32_t> parse_ipv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::string format_interfaces(const std::vector<Interface>& interfaces) {
  std::string s;
  for (const Interface& i : interfaces)
    s += fmt::format("{}/{}/{}/{};", i.name, format_ipv4(i.address), i.prefix, i.loopback ? 1 : 0);
  return s;
}

std::vector<Interface> parse_interfaces(const std::string& text) {
  std::vector<Interface> out;
  for (const std::string& item : split(text, ';')) {
    const auto f = split(item, '/');
    if (f.size() != 4) continue;
    const auto address = parse_ipv4(f[1]);
    if (!address) continue;
    out.push_back(Interface{f[0], *address, std::atoi(f[2].c_str()), f[3] == "1"});
  }
  return out;
}

std::vector<Interface> mpi_interfaces(const std::vector<Interface>& all, const char* include, const char* exclude) {
  std::vector<Interface> out;
  const auto inc = split(include != nullptr ? include : "", ',');
  const auto exc = split(exclude != nullptr ? exclude : "", ',');
  for (const Interface& i : all) {
    if (i.loopback) continue;
    const auto any = [&i](const std::vector<std::string>& list) {
      for (const auto& e : list)
        if (matches(i, e)) return true;
      return false;
    };
    if (!inc.empty() && !any(inc)) continue;
    if (any(exc)) continue;
    out.push_back(i);
  }
  return out;
}

std::optional<std::uint32_t> reachable_address(const std::vector<Interface>& hub, const std::vector<Interface>& rank) {
  if (hub.empty()) return std::nullopt;
  for (const Interface& h : hub) {
    for (const Interface& r : rank) {
      if (!r.loopback && (r.address & mask(h.prefix)) == (h.address & mask(h.prefix))) return h.address;
    }
  }
  return hub.front().address;
}

std::pair<int, int> listen_on(std::uint32_t address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(fmt::format("socket(): {}", std::strerror(errno)));
  sockaddr_in a = socket_address(address, 0);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, SOMAXCONN) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot listen on {}: {}", format_ipv4(address), why));
  }
  set_nonblocking(fd);
  return {fd, ntohs(a.sin_port)};
}

int connect_to(std::uint32_t address, int port, std::chrono::milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  set_nonblocking(fd);
  const sockaddr_in a = socket_address(address, port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINPROGRESS) {
      close_fd(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1 ||
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      close_fd(fd);
      return -1;
    }
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

FramedSocket::FramedSocket(FramedSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), in_(std::move(other.in_)), out_(std::move(other.out_)) {}

FramedSocket& FramedSocket::operator=(FramedSocket&& other) noexcept {
  if (this != &other) {
    close_fd(fd_);
    fd_ = std::exchange(other.fd_, -1);
    in_ = std::move(other.in_);
    out_ = std::move(other.out_);
  }
  return *this;
}

void FramedSocket::send_latest(std::uint32_t type, std::span<const std::byte> payload) {
  if (fd_ < 0) return;
  if (out_.empty()) {
    append_le32(out_, type);
    append_le32(out_, static_cast<std::uint32_t>(payload.size()));
    out_.insert(out_.end(), payload.begin(), payload.end());
  }
  flush();
}

void FramedSocket::flush() {
  while (fd_ >= 0 && !out_.empty()) {
    const ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_.erase(out_.begin(), out_.begin() + n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      close();
    }
  }
}

void FramedSocket::receive() {
  std::byte buffer[16384];
  while (fd_ >= 0) {
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      in_.insert(in_.end(), buffer, buffer + n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      close();  // EOF or error; what was read stays to be taken
    }
  }
}

std::optional<std::pair<std::uint32_t, std::vector<std::byte>>> FramedSocket::next_frame(std::size_t max_payload) {
  if (in_.size() < kHeaderBytes) return std::nullopt;
  const std::uint32_t type = read_le32(in_.data());
  const std::size_t length = read_le32(in_.data() + 4);
  if (length > max_payload) {
    close();
    in_.clear();
    return std::nullopt;
  }
  if (in_.size() < kHeaderBytes + length) return std::nullopt;
  std::vector<std::byte> payload(in_.begin() + kHeaderBytes, in_.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + length));
  in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + length));
  return std::make_pair(type, std::move(payload));
}

}  // namespace ringtrain
