#include "placement/placement.hpp"

#include <algorithm>
#include <cerrno>

#include "runner/port_probe.hpp"

namespace pto::placement {
namespace {

// What waiting may cure: descriptors or memory, which running jobs give back.
bool is_shortage(int err)
{
    return err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM;
}

}  // namespace

Placement::Placement(std::unique_ptr<Devices> devices, int port_low, int port_high, Leasing leasing)
    : devices_(std::move(devices)), ports_(port_low, port_high), port_low_(port_low), port_high_(port_high),
      leasing_(std::move(leasing))
{
}

// Each try that meets another run's lease sets one device or port aside,
// so the tries end.
tl::expected<Grant, Shortage> Placement::acquire(const Need& need)
{
    const auto port_free = [this](int port) { return aside_ports_.count(port) == 0 && runner::tcp_port_free(port); };
    for (;;) {
        Grant grant;
        if (!devices_->acquire(need.devices, need.slots, grant))
            return tl::unexpected(Shortage::devices);
        auto ports = ports_.acquire(need.ports, port_free);
        if (!ports) {
            devices_->release(grant);
            return tl::unexpected(aside_ports_.empty() ? Shortage::ports : Shortage::leased);
        }
        grant.ports = std::move(*ports);
        if (leasing_.dir == nullptr)
            return grant;
        auto busy = lease(grant);
        if (!busy && !is_shortage(busy.error().sys_errno) && leave_out(grant, busy.error()))
            continue;
        if (!busy) {
            devices_->release(grant);
            ports_.release(grant.ports);
            lease_error_ = busy.error();
            return tl::unexpected(Shortage::lease_failed);
        }
        if (!*busy)
            return grant;
        const std::size_t k = **busy;
        if (k < grant.devices.size()) {
            devices_->set_aside(grant, grant.devices[k]);
        } else {
            devices_->release(grant);
            ports_.release(grant.ports);
            aside_ports_.insert(grant.ports[k - grant.devices.size()]);
        }
    }
}

// A lease file this run cannot use (a directory, a symlink, another
// user's file, no inode left): its device or port is never handed out in
// this run, said once, and the other devices are tried.
bool Placement::leave_out(const Grant& grant, const Error& why)
{
    const auto keys = lease_keys(grant);
    const auto k = static_cast<std::size_t>(std::find(keys.begin(), keys.end(), leasing_.dir->failed_key()) -
                                            keys.begin());
    if (k >= keys.size())
        return false;
    std::string what;
    if (k < grant.devices.size()) {
        const int id = grant.devices[k];
        Grant one;
        one.devices = {id};
        one.device_count = 1;
        one.slots = grant.slots;
        // Withheld while the grant holds it, so that its release keeps it.
        (void)devices_->withhold(one);
        devices_->release(grant);
        ports_.release(grant.ports);
        left_out_.push_back(id);
        what = "device " + (leasing_.identity ? leasing_.identity(id) : std::to_string(id));
    } else {
        const int port = grant.ports[k - grant.devices.size()];
        ports_.withhold(std::span<const int>(&port, 1));
        devices_->release(grant);
        for (int p : grant.ports)
            if (p != port)
                ports_.release(std::span<const int>(&p, 1));
        what = "port " + std::to_string(port);
    }
    if (leasing_.notice)
        leasing_.notice(what + " is left out of this run: " + why.message +
                        " (a lease file this run cannot use; remove it, or give another --lock-dir)");
    return true;
}

std::vector<std::string> Placement::lease_keys(const Grant& grant) const
{
    std::vector<std::string> keys;
    keys.reserve(grant.devices.size() + grant.ports.size());
    for (int id : grant.devices)
        keys.push_back(leases::device_key(leasing_.identity ? leasing_.identity(id) : std::to_string(id)));
    for (int port : grant.ports)
        keys.push_back(leases::port_key(port));
    return keys;
}

Expected<std::optional<std::size_t>> Placement::lease(const Grant& grant)
{
    const auto keys = lease_keys(grant);
    std::vector<std::string> missing;
    for (const auto& k : keys)
        if (held_.count(k) == 0)
            missing.push_back(k);
    if (!missing.empty()) {
        // Holding no lease, nothing of this run runs on a device or port.
        auto taken = leasing_.dir->try_take(missing, held_.empty());
        if (!taken)
            return tl::unexpected(taken.error());
        if (const auto* busy = std::get_if<leases::Busy>(&*taken)) {
            const auto k = static_cast<std::size_t>(std::find(keys.begin(), keys.end(), busy->key) - keys.begin());
            const std::size_t devices = grant.devices.size();
            waiting_ = Waiting{k < devices ? "device " + (leasing_.identity ? leasing_.identity(grant.devices[k])
                                                                            : std::to_string(grant.devices[k]))
                                           : "port " + std::to_string(grant.ports[k - devices]),
                               busy->holder, busy->yielded};
            return k;
        }
        for (auto& l : std::get<std::vector<leases::Lease>>(*taken)) {
            std::string key = l.key();
            held_.emplace(std::move(key), Held{std::move(l), 0});
        }
    }
    for (const auto& k : keys)
        ++held_.find(k)->second.users;
    return std::nullopt;
}

void Placement::give_back(const Grant& grant)
{
    if (leasing_.dir == nullptr)
        return;
    for (const auto& k : lease_keys(grant)) {
        const auto it = held_.find(k);
        // Closing the last descriptor gives the lease back to other runs.
        if (it != held_.end() && --it->second.users == 0)
            held_.erase(it);
    }
}

void Placement::release(const Grant& grant)
{
    devices_->release(grant);
    ports_.release(grant.ports);
    give_back(grant);
}

void Placement::bring_back()
{
    devices_->bring_back();
    aside_ports_.clear();
    waiting_.reset();
}

void Placement::stop_waiting()
{
    if (leasing_.dir != nullptr)
        leasing_.dir->stop_waiting();
}

bool Placement::withhold(const Grant& grant)
{
    ports_.withhold(grant.ports);
    return devices_->withhold(grant);
}

bool Placement::usable_for(const Need& need) const
{
    return need.devices <= devices_->usable() && need.ports <= ports_.usable();
}

std::string Placement::shortfall(const Need& need) const
{
    return "needs " + std::to_string(need.devices) + (need.devices == 1 ? " device" : " devices") + " but only " + std::to_string(devices_->usable()) +
           " remain usable" + devices_->scope();
}

bool Placement::fits_after(const Need& need, std::span<const Grant* const> freed) const
{
    return devices_->fits_after(need.devices, need.slots, freed);
}

}  // namespace pto::placement
