#pragma once

namespace pto::runner {

// True if nothing on this machine holds TCP `port` now: it can be bound on
// every IPv4 and (where there is IPv6) every IPv6 address. A port in
// TIME_WAIT counts as held, as it would for a server that binds it.
bool tcp_port_free(int port);

}  // namespace pto::runner
