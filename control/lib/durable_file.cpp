// SPDX-License-Identifier: Apache-2.0
#include "durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "unique_fd.h"

namespace sluice {
namespace {

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

Status fsync_dir(const std::string& dir) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0) return Error{"cannot open directory " + dir + ": " + errno_text(errno)};
    if (::fsync(fd.get()) != 0) return Error{"cannot fsync directory " + dir + ": " + errno_text(errno)};
    return ok_status();
}

Status write_file_durably(const std::string& dir, std::string_view name, std::string_view content) {
    const std::string path = dir + "/" + std::string(name);
    const std::string temp = path + std::string(kDurableTempSuffix);
    UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return Error{"cannot create " + temp + ": " + errno_text(errno)};
    // A failed write leaves no temp file behind: on a full disk it would hold
    // the space the next attempt needs.
    struct RemoveTemp {
        const std::string& temp;
        bool armed = true;
        ~RemoveTemp() {
            if (armed) ::unlink(temp.c_str());
        }
    } remove_temp{temp};
    size_t written = 0;
    while (written < content.size()) {
        const ssize_t n = ::write(fd.get(), content.data() + written, content.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error{"cannot write " + temp + ": " + errno_text(errno)};
        written += static_cast<size_t>(n);
    }
    if (::fsync(fd.get()) != 0) return Error{"cannot fsync " + temp + ": " + errno_text(errno)};
    if (fd.close() != 0) return Error{"cannot close " + temp + ": " + errno_text(errno)};
    if (::rename(temp.c_str(), path.c_str()) != 0)
        return Error{"cannot rename " + temp + " to " + path + ": " + errno_text(errno)};
    remove_temp.armed = false;
    return fsync_dir(dir);
}

Result<std::string> read_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return Error{"cannot read " + path + ": " + errno_text(errno)};
    std::string content;
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error{"cannot read " + path + ": " + errno_text(errno)};
        if (n == 0) break;
        content.append(buffer, static_cast<size_t>(n));
    }
    return content;
}

}  // namespace sluice
