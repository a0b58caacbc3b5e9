// libjhvd_listen.so, loaded with LD_PRELOAD into mpiexec, Open MPI's daemons and the ranks by hvdrun and
// %%hvd (jupyter_hvd/runner/launch.py): the sockets that Open MPI, its launcher (PRRTE) and PMIx bind to the
// wildcard address, with no option to choose another, are bound instead to the addresses that
// JUPYTER_HVD_LISTEN names: "loopback", or interface names and CIDR networks ("eth0,10.1.0.0/16"), as in
// Open MPI's btl_tcp_if_include. A family with no such address on this host gets its loopback address.
// Only binds called from those libraries change (the caller's library is looked up with dladdr), so a
// server that the user's own code starts on a rank is left as it asked. It uses nothing of the C++ library
// and exports nothing but bind, so it can be loaded into any process.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace {

using BindFn = int (*)(int, const sockaddr*, socklen_t);

constexpr const char* kVariable = "JUPYTER_HVD_LISTEN";
constexpr const char* kOpenMpiLibraries[] = {"libopen-pal.", "libprrte.", "libpmix.", "libmpi."};
constexpr int kMaxRules = 16;
constexpr size_t kNameSize = 64;

struct Rule {
  char name[kNameSize];  // an interface name, or empty for a network
  int family;
  unsigned char net[16];
  int prefix;
};

struct Rules {
  bool active;    // JUPYTER_HVD_LISTEN is set
  bool loopback;  // "loopback": every wildcard bind goes to the loopback address
  int count;
  Rule rule[kMaxRules];
};

Rules g_rules;
BindFn g_real_bind = nullptr;
pthread_once_t g_once = PTHREAD_ONCE_INIT;

// "10.1.0.0/16" or "fd00::/8" into rule; false for anything else (an interface name).
bool parse_network(const char* text, Rule* rule) {
  const char* slash = std::strchr(text, '/');
  if (slash == nullptr || static_cast<size_t>(slash - text) >= kNameSize) return false;
  char addr[kNameSize];
  std::memcpy(addr, text, slash - text);
  addr[slash - text] = '\0';
  char* end = nullptr;
  const long prefix = std::strtol(slash + 1, &end, 10);
  if (end == slash + 1 || *end != '\0') return false;
  if (inet_pton(AF_INET, addr, rule->net) == 1 && prefix >= 0 && prefix <= 32) {
    rule->family = AF_INET;
  } else if (inet_pton(AF_INET6, addr, rule->net) == 1 && prefix >= 0 && prefix <= 128) {
    rule->family = AF_INET6;
  } else {
    return false;
  }
  rule->prefix = static_cast<int>(prefix);
  return true;
}

void setup() {
  g_real_bind = reinterpret_cast<BindFn>(dlsym(RTLD_NEXT, "bind"));
  const char* value = std::getenv(kVariable);
  if (value == nullptr || *value == '\0') return;
  g_rules.active = true;
  if (std::strcmp(value, "loopback") == 0) {
    g_rules.loopback = true;
    return;
  }
  for (const char* item = value; *item != '\0' && g_rules.count < kMaxRules;) {
    const size_t length = std::strcspn(item, ",");
    if (length > 0 && length < kNameSize) {
      Rule& rule = g_rules.rule[g_rules.count++];
      std::memcpy(rule.name, item, length);
      rule.name[length] = '\0';
      if (parse_network(rule.name, &rule)) rule.name[0] = '\0';
    }
    item += length + (item[length] == ',' ? 1 : 0);
  }
}

const Rules& rules() {
  pthread_once(&g_once, setup);
  return g_rules;
}

const unsigned char* address_bytes(const sockaddr* addr) {
  return addr->sa_family == AF_INET
             ? reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(addr)->sin_addr)
             : reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
}

bool in_network(const sockaddr* addr, const Rule& rule) {
  if (addr->sa_family != rule.family) return false;
  const unsigned char* bytes = address_bytes(addr);
  const int full = rule.prefix / 8, rest = rule.prefix % 8;
  if (std::memcmp(bytes, rule.net, full) != 0) return false;
  if (rest == 0) return true;
  const unsigned char mask = static_cast<unsigned char>(0xff << (8 - rest));
  return (bytes[full] & mask) == (rule.net[full] & mask);
}

bool is_wildcard(const sockaddr* addr, socklen_t len) {
  if (addr->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in)))
    return reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (addr->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6)))
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
  return false;
}

bool called_from_open_mpi(const void* caller) {
  Dl_info info;
  if (dladdr(caller, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* slash = std::strrchr(info.dli_fname, '/');
  const char* base = slash ? slash + 1 : info.dli_fname;
  for (const char* prefix : kOpenMpiLibraries)
    if (std::strncmp(base, prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

bool named(const ifaddrs* ifa) {
  for (int i = 0; i < rules().count; ++i) {
    const Rule& rule = rules().rule[i];
    if (rule.name[0] != '\0' ? std::strcmp(rule.name, ifa->ifa_name) == 0 : in_network(ifa->ifa_addr, rule))
      return true;
  }
  return false;
}

// `wanted` with its wildcard address replaced (its port kept): by the first of this host's addresses of that
// family that a rule names, else by the loopback address.
void choose(const sockaddr* wanted, sockaddr_storage* out, socklen_t* out_len) {
  const int family = wanted->sa_family;
  *out_len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  std::memcpy(out, wanted, *out_len);
  auto* in = reinterpret_cast<sockaddr_in*>(out);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  ifaddrs* all = nullptr;
  if (!rules().loopback && getifaddrs(&all) == 0) {
    for (const ifaddrs* ifa = all; ifa != nullptr; ifa = ifa->ifa_next) {
      if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != family || !named(ifa)) continue;
      if (family == AF_INET)
        in->sin_addr = reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr)->sin_addr;
      else
        in6->sin6_addr = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr;
      freeifaddrs(all);
      return;
    }
    freeifaddrs(all);
  }
  if (family == AF_INET)
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  else
    in6->sin6_addr = in6addr_loopback;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int bind(int fd, const sockaddr* addr, socklen_t len) {
  const bool active = rules().active;
  if (addr == nullptr || !active || !is_wildcard(addr, len) || !called_from_open_mpi(__builtin_return_address(0)))
    return g_real_bind(fd, addr, len);
  sockaddr_storage chosen;
  socklen_t chosen_len = 0;
  choose(addr, &chosen, &chosen_len);
  return g_real_bind(fd, reinterpret_cast<const sockaddr*>(&chosen), chosen_len);
}
