#include "devices/discovery.hpp"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <set>

#include <pto/devices.hpp>

#include "common/text.hpp"

namespace pto {
namespace {

// Variables in the order they are asked; the first one set decides.
constexpr const char* variables[] = {
    "PTO_PAR_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS",
};

bool is_alpha(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

// What GPU UUIDs ("GPU-8f2a..."), MIG ids ("MIG-...", or the older
// "MIG-GPU-<uuid>/1/0") and Ascend or ROCm names are made of.
bool is_name_char(char c)
{
    return is_alpha(c) || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == ':' || c == '/';
}

std::vector<std::string_view> split_parts(std::string_view value)
{
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (start <= value.size()) {
        std::size_t comma = value.find(',', start);
        if (comma == std::string_view::npos)
            comma = value.size();
        if (const auto part = text::trim(value.substr(start, comma - start)); !part.empty())
            parts.push_back(part);
        start = comma + 1;
    }
    return parts;
}

std::string kind_of_names(const std::vector<std::string>& names)
{
    const auto all_start = [&](std::string_view prefix) {
        return std::all_of(names.begin(), names.end(),
                           [&](const std::string& n) { return std::string_view(n).substr(0, prefix.size()) == prefix; });
    };
    if (all_start("GPU-"))
        return "GPU UUIDs";
    if (all_start("MIG-"))
        return "MIG ids";
    return "device names";
}

Expected<DiscoveredPool> from_variable(const std::string& name, std::string_view value)
{
    const std::string dollar = "$" + name;
    const auto parts = split_parts(value);
    const std::string_view whole = text::trim(value);
    // CUDA's own spellings of "none": -1 (any invalid ordinal ends its list)
    // and NoDevFiles (what Slurm and SGE put there for a job without GPUs).
    if (parts.empty() || whole == "-1" || whole == "NoDevFiles") {
        const std::string why = parts.empty() ? " is empty" : " is '" + std::string(whole) + "'";
        return DiscoveredPool{{}, dollar + why + ": no devices", name, {}};
    }

    std::string_view a_number;
    std::string_view a_name;
    for (const auto part : parts) {
        // A number or range starts with a digit (or the '-' of a negative
        // id, which parse_device_range explains); a name with a letter.
        const char c = part.front();
        if (!is_alpha(c) && !(c >= '0' && c <= '9') && c != '-')
            return fail(dollar + ": neither a device number nor a device name: '" + text::printable(part) +
                        "' (expected ids like 0,1 or names like GPU-8f2a...)");
        (is_alpha(c) ? a_name : a_number) = part;
    }
    if (!a_name.empty() && !a_number.empty())
        return fail(dollar + ": mixes device numbers ('" + text::printable(a_number) + "') and device names ('" +
                    text::printable(a_name) + "'); use one kind");

    if (a_name.empty()) {
        auto ids = parse_device_range(value);
        if (!ids)
            return fail(dollar + ": " + text::printable(ids.error().message));
        DiscoveredPool pool{std::move(*ids), dollar, name, {}};
        // Every job gets $PTO_PAR_DEVICES set to its devices anyway.
        if (name != "PTO_PAR_DEVICES")
            pool.narrowed = name;
        return pool;
    }

    std::vector<std::string> entries;
    std::set<std::string_view> seen;
    for (const auto part : parts) {
        if (!std::all_of(part.begin(), part.end(), is_name_char))
            return fail(dollar + ": invalid device name '" + text::printable(part) +
                        "': expected letters, digits and - _ . : / (a GPU UUID like GPU-8f2a..., a MIG id)");
        // Two positions for one device would let two jobs share it.
        if (!seen.insert(part).second)
            return fail(dollar + ": device '" + text::printable(part) + "' is listed twice");
        entries.emplace_back(part);
    }
    if (entries.size() > static_cast<std::size_t>(max_device_id) + 1)
        return fail(dollar + ": " + std::to_string(entries.size()) + " devices; at most " +
                    std::to_string(max_device_id + 1) + " are supported");
    std::vector<int> ids(entries.size());
    for (std::size_t i = 0; i < ids.size(); ++i)
        ids[i] = static_cast<int>(i);
    const std::string source = dollar + " (" + kind_of_names(entries) + ", as position" +
                               (ids.size() == 1 ? " " : "s ") + format_device_range(ids) + ")";
    DiscoveredPool pool{std::move(ids), source, name, std::move(entries)};
    pool.narrowed = name;
    return pool;
}

// Inside a job of a run whose pool came from device names: the job's own
// devices by those names, handed back in the variable they came from, so
// that a nested run neither takes the outer run's positions for devices
// nor loses the UUIDs. nullopt when the outer pool was numbered (its jobs
// get an empty $PTO_PAR_DEVICE_NAMES): $PTO_PAR_DEVICES then decides alone.
std::optional<Expected<DiscoveredPool>> from_outer_run(const GetenvFn& getenv_fn, std::string_view ids_value)
{
    const char* names = getenv_fn(device_names_variable);
    if (names == nullptr || text::trim(names).empty())
        return std::nullopt;
    const std::string dollar = std::string("$") + device_names_variable;
    const char* var = getenv_fn(device_variable_variable);
    if (var == nullptr || !text::is_env_name(var))
        return fail(dollar + " is set but $" + device_variable_variable +
                    " does not name the variable its devices came from; pto-par sets both for its jobs");
    auto pool = from_variable(device_names_variable, names);
    if (!pool)
        return pool;
    if (pool->entries.empty())
        return fail(dollar + ": expected device names (GPU UUIDs, MIG ids), not numbers; $PTO_PAR_DEVICES " +
                    "holds the numbers");
    const auto ids = parse_device_range(ids_value);
    if (!ids)
        return fail("$PTO_PAR_DEVICES: " + text::printable(ids.error().message));
    if (ids->size() != pool->entries.size())
        return fail("$PTO_PAR_DEVICES has " + std::to_string(ids->size()) + " devices but " + dollar + " names " +
                    std::to_string(pool->entries.size()) + "; pto-par sets both for its jobs: unset " +
                    device_names_variable + " to use $PTO_PAR_DEVICES alone");
    pool->variable = var;
    pool->narrowed = var;
    pool->source = dollar + " (" + kind_of_names(pool->entries) + " of the outer run's $" + var + ", as position" +
                   (pool->ids.size() == 1 ? " " : "s ") + format_device_range(pool->ids) + ")";
    return pool;
}

// The N of "<prefix>N" with N all digits, else -1: davinci_manager,
// nvidiactl, nvidia-uvm, nvidia-caps and friends are not devices.
int device_number(std::string_view entry, std::string_view prefix)
{
    if (entry.size() <= prefix.size() || entry.substr(0, prefix.size()) != prefix)
        return -1;
    const auto digits = entry.substr(prefix.size());
    if (digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return -1;
    int n = 0;
    for (const char c : digits)
        n = n * 10 + (c - '0');
    return n <= max_device_id ? n : -1;
}

// Inside a job of a numbered pool: the variable the outer run narrowed
// ($PTO_PAR_DEVICE_VARIABLE), whose entries are the job's devices in the
// order of $PTO_PAR_DEVICES, so that this run's jobs get theirs of them.
// Left alone when its entries do not match the devices one for one.
void narrow_as_outer_run(const GetenvFn& getenv_fn, DiscoveredPool& pool)
{
    const char* var = getenv_fn(device_variable_variable);
    if (var == nullptr || !text::is_env_name(var) || std::string_view(var) == "PTO_PAR_DEVICES")
        return;
    const char* value = getenv_fn(var);
    if (value == nullptr)
        return;
    const auto parts = split_parts(value);
    if (parts.size() != pool.ids.size())
        return;
    pool.narrowed = var;
    pool.narrowed_entries.assign(parts.begin(), parts.end());
}

// A pool of /dev nodes: the platform's variable is narrowed, by the
// positions of the nodes.
DiscoveredPool from_dev_nodes(std::vector<int> ids, std::string source, const char* variable)
{
    DiscoveredPool pool{std::move(ids), std::move(source), {}, {}};
    pool.narrowed = variable;
    for (std::size_t i = 0; i < pool.ids.size(); ++i)
        pool.narrowed_entries.push_back(std::to_string(i));
    return pool;
}

struct DevNodes {
    std::vector<int> davinci, nvidia;
};

Expected<DevNodes> scan_dev(const std::string& dev_root)
{
    DevNodes found;
    const std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(dev_root.c_str()), closedir);
    if (!dir) {
        // A root without /dev (a minimal container, a test) simply has no devices.
        if (errno == ENOENT || errno == ENOTDIR)
            return found;
        return tl::unexpected(sys_error("cannot list " + dev_root + " to find devices (pass -d)", errno));
    }
    for (;;) {
        errno = 0;
        const dirent* e = readdir(dir.get());
        if (e == nullptr) {
            if (errno != 0)
                return tl::unexpected(sys_error("cannot list " + dev_root + " to find devices (pass -d)", errno));
            break;
        }
        if (const int n = device_number(e->d_name, "davinci"); n >= 0)
            found.davinci.push_back(n);
        else if (const int m = device_number(e->d_name, "nvidia"); m >= 0)
            found.nvidia.push_back(m);
    }
    for (auto* ids : {&found.davinci, &found.nvidia}) {
        std::sort(ids->begin(), ids->end());
        // "davinci3" and "davinci03" are one device.
        ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
    }
    return found;
}

}  // namespace

std::string DiscoveredPool::value_for(std::string_view var, std::span<const int> job_ids) const
{
    if (!narrowed_entries.empty() && var == narrowed && (entries.empty() || var != variable)) {
        std::string out;
        for (const int id : job_ids) {
            const auto at = std::lower_bound(ids.begin(), ids.end(), id);
            if (!out.empty())
                out += ',';
            // As below: ids always come from this pool.
            out += at != ids.end() && *at == id ? narrowed_entries[static_cast<std::size_t>(at - ids.begin())]
                                                : std::to_string(id);
        }
        return out;
    }
    if (entries.empty() || var != variable)
        return format_device_list(job_ids);
    std::string out;
    for (const int id : job_ids) {
        if (!out.empty())
            out += ',';
        // Ids always come from this pool; the number is only a fallback
        // for a caller that mixed pools up.
        if (id >= 0 && static_cast<std::size_t>(id) < entries.size())
            out += entries[static_cast<std::size_t>(id)];
        else
            out += std::to_string(id);
    }
    return out;
}

Expected<DiscoveredPool> discover_devices(const GetenvFn& getenv_fn, const std::string& dev_root)
{
    for (const char* name : variables) {
        const char* value = getenv_fn(name);
        if (value == nullptr)
            continue;
        if (std::string_view(name) != "PTO_PAR_DEVICES")
            return from_variable(name, value);
        if (auto nested = from_outer_run(getenv_fn, value))
            return std::move(*nested);
        auto pool = from_variable(name, value);
        if (pool)
            narrow_as_outer_run(getenv_fn, *pool);
        return pool;
    }

    auto nodes = scan_dev(dev_root);
    if (!nodes)
        return tl::unexpected(nodes.error());
    const std::string root = !dev_root.empty() && dev_root.back() == '/' ? dev_root : dev_root + "/";
    if (!nodes->davinci.empty())
        return from_dev_nodes(std::move(nodes->davinci), root + "davinci*", "ASCEND_RT_VISIBLE_DEVICES");
    if (!nodes->nvidia.empty()) {
        auto pool = from_dev_nodes(std::move(nodes->nvidia), root + "nvidia*", "CUDA_VISIBLE_DEVICES");
        // The device files are numbered in PCI bus order; a GPU's position
        // among them is its CUDA number only in that order.
        if (getenv_fn("CUDA_DEVICE_ORDER") == nullptr)
            pool.also_set.emplace_back("CUDA_DEVICE_ORDER=PCI_BUS_ID");
        return pool;
    }
    return DiscoveredPool{{}, "nothing found: no devices", {}, {}};
}

}  // namespace pto
