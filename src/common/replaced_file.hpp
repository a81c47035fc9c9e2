// A report that replaces its file whole or not at all: written to a hidden
// temporary beside it and renamed over it when complete, so that a run
// killed half-way (SIGKILL included) leaves the previous report as it was.
#pragma once

#include <string>

#include <pto/error.hpp>

namespace pto {

class ReplacedFile {
public:
    // `what` names the file in messages ("JUnit report", "--json file").
    static Expected<ReplacedFile> open(const std::string& path, const std::string& what);

    ReplacedFile() = default;
    ReplacedFile(ReplacedFile&& o) noexcept;
    ReplacedFile& operator=(ReplacedFile&& o) noexcept;
    ReplacedFile(const ReplacedFile&) = delete;
    ReplacedFile& operator=(const ReplacedFile&) = delete;
    // Not committed: the temporary is removed, the file left as it was.
    ~ReplacedFile();

    // Where to write: the temporary, or the file itself when it is no
    // regular file (/dev/stdout, a FIFO), which is appended to in place.
    int fd() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }

    // Makes what was written durable and gives it the file's name.
    Expected<void> commit();
    // Removes the temporary; the file keeps its previous content.
    void discard();

private:
    int fd_ = -1;
    std::string what_;
    std::string path_;        // as given, for messages
    std::string temp_path_;   // empty when writing the file in place
    std::string final_path_;  // what temp_path_ is renamed to
};

}  // namespace pto
