// The run's lock directory as chosen, the file names of its leases, and
// what an outer run hands down.
#include "devices/leases.hpp"

#include "devices/port_pool.hpp"

namespace pto::leases {

Expected<std::optional<std::string>> choose_lock_dir(const std::optional<std::string>& option, const char* env)
{
    std::string value;
    if (option) {
        if (option->empty())
            return fail("--lock-dir needs a directory, or 'none' for no leases across runs");
        value = *option;
    } else if (env != nullptr) {
        if (*env == '\0')
            return fail(std::string("$") + lock_dir_variable + " is set but empty: unset it, or name a directory or 'none'");
        value = env;
    }
    if (value == "none")
        return std::optional<std::string>();
    return std::optional<std::string>(value);
}

std::string device_key(std::string_view identity)
{
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string key = "device-";
    for (const char c : identity) {
        const auto u = static_cast<unsigned char>(c);
        const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                          c == '_' || c == '-';
        if (keep) {
            key += c;
        } else {
            key += '%';
            key += hex[u >> 4];
            key += hex[u & 15];
        }
    }
    return key;
}

std::string port_key(int port)
{
    return "port-" + std::to_string(port);
}

Inherited inherited_from(const std::function<const char*(const char*)>& getenv_fn)
{
    Inherited got;
    if (getenv_fn("PTO_PAR_SEQ") == nullptr)
        return got;
    const char* names = getenv_fn("PTO_PAR_DEVICE_NAMES");
    const char* devices = names != nullptr && *names != '\0' ? names : getenv_fn("PTO_PAR_DEVICES");
    for (std::string_view rest = devices != nullptr ? devices : ""; !rest.empty();) {
        const auto comma = rest.find(',');
        if (const auto entry = rest.substr(0, comma); !entry.empty())
            got.devices.emplace_back(entry);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    // "LOW-HIGH" as the outer run writes it; anything else inherits no port.
    if (const char* ports = getenv_fn("PTO_PAR_PORTS"); ports != nullptr)
        if (const auto range = parse_port_range(ports))
            for (int p = range->first; p <= range->second; ++p)
                got.ports.push_back(p);
    return got;
}

}  // namespace pto::leases
