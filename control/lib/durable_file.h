// SPDX-License-Identifier: Apache-2.0
// Files the daemon keeps in its state directory (policy versions, bans) and
// must find whole after a crash: a write replaces the file with the old or
// the new content, never a mix.
#pragma once

#include <string>
#include <string_view>

#include "result.h"

namespace sluice {

// What a write in progress is called (<name> + this): a file that ends in it
// was never finished, and whoever lists the directory may remove it.
inline constexpr std::string_view kDurableTempSuffix = ".tmp";

// Replaces dir/name with `content`: temp file, fsync, rename, fsync the
// directory. On error nothing is left behind and dir/name is as it was
// (unless only the directory's fsync failed: then the rename may survive a
// crash or not).
Status write_file_durably(const std::string& dir, std::string_view name, std::string_view content);

// fsync of a directory, so a rename or unlink in it survives a crash.
Status fsync_dir(const std::string& dir);

// The whole content of `path`; the error names it.
Result<std::string> read_file(const std::string& path);

}  // namespace sluice
