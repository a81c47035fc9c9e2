#include "runner/port_probe.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

#include "common/unique_fd.hpp"

namespace pto::runner {
namespace {

// -1 when the address family does not exist here, else whether bind worked.
int try_bind(int family, int port)
{
    UniqueFd s(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s)
        return errno == EAFNOSUPPORT ? -1 : 0;
    if (family == AF_INET6) {
        const int on = 1;
        // Only the v6 side: the v4 side was asked on its own.
        (void)setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(static_cast<std::uint16_t>(port));
        a.sin6_addr = in6addr_any;
        if (bind(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0)
            return 1;
        return errno == EADDRNOTAVAIL ? -1 : 0;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    return bind(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 ? 1 : 0;
}

}  // namespace

bool tcp_port_free(int port)
{
    return try_bind(AF_INET, port) == 1 && try_bind(AF_INET6, port) != 0;
}

}  // namespace pto::runner
