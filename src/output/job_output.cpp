#include <pto/job_output.hpp>

namespace pto {

void JobOutput::append(std::string_view bytes)
{
    bytes_.append(bytes);
}

Expected<void> JobOutput::for_each_chunk(const std::function<bool(std::string_view)>& sink) const
{
    if (!bytes_.empty())
        sink(bytes_);
    return {};
}

std::string_view JobOutput::last_line() const
{
    std::string_view all = bytes_;
    if (!all.empty() && all.back() == '\n')
        all.remove_suffix(1);
    const auto nl = all.rfind('\n');
    return nl == std::string_view::npos ? all : all.substr(nl + 1);
}

}  // namespace pto
