// SPDX-License-Identifier: Apache-2.0
// Prefix-list files: a parser fast enough for millions of lines (IPv4 by
// hand; IPv6 through inet_pton without allocating), then sort, duplicates,
// and the canonical text.
#include "prefix_list.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "unique_fd.h"
#include "version_store.h"

namespace sluice {
namespace {

constexpr std::string_view kTrailerStart = "#! list ";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// "a.b.c.d" in decimal, each part 0..255 without a sign or a leading zero
// (which some parsers read as octal).
bool parse_ipv4(std::string_view text, uint8_t* out) {
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= text.size() || text[i] != '.') return false;
            i++;
        }
        const size_t start = i;
        unsigned value = 0;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 3)
            value = value * 10 + static_cast<unsigned>(text[i++] - '0');
        const size_t digits = i - start;
        if (digits == 0 || value > 255 || (digits > 1 && text[start] == '0')) return false;
        out[part] = static_cast<uint8_t>(value);
    }
    return i == text.size();
}

// One token, "address" or "address/length", into `prefix`; the error says
// what is wrong with it.
Status parse_token(std::string_view token, PolicyPrefix& prefix) {
    const size_t slash = token.find('/');
    const std::string_view address = token.substr(0, slash);
    prefix = PolicyPrefix{};
    if (parse_ipv4(address, prefix.addr.data())) {
        prefix.family = SLUICE_FAMILY_IPV4;
    } else {
        char buffer[INET6_ADDRSTRLEN + 1];
        if (address.size() >= sizeof(buffer) || address.find(':') == std::string_view::npos)
            return Error{"\"" + std::string(token) + "\" is not an IPv4 or IPv6 address or prefix"};
        address.copy(buffer, address.size());
        buffer[address.size()] = '\0';
        if (inet_pton(AF_INET6, buffer, prefix.addr.data()) != 1)
            return Error{"\"" + std::string(token) + "\" is not an IPv4 or IPv6 address or prefix"};
        prefix.family = SLUICE_FAMILY_IPV6;
    }
    const unsigned bits = family_bits(prefix.family);
    unsigned length = bits;
    if (slash != std::string_view::npos) {
        const std::string_view digits = token.substr(slash + 1);
        length = 0;
        bool valid = !digits.empty() && digits.size() <= 3 && !(digits.size() > 1 && digits[0] == '0');
        for (const char c : digits) {
            if (c < '0' || c > '9') valid = false;
            length = length * 10 + static_cast<unsigned>(c - '0');
        }
        if (!valid || length > bits)
            return Error{"\"" + std::string(token) + "\": the prefix length must be 0.." + std::to_string(bits)};
    }
    prefix.length = static_cast<uint8_t>(length);
    if (!host_bits_clear(prefix))
        return Error{"\"" + std::string(token) + "\" has host bits set past /" + std::to_string(length) + " (did you mean " +
                     prefix_text(masked_prefix(prefix)) + "?)"};
    return ok_status();
}

// Appends "a.b.c.d/len" or the IPv6 text form and "/len".
void append_prefix(std::string& out, const PolicyPrefix& p) {
    if (p.family == SLUICE_FAMILY_IPV4) {
        char text[24];
        char* at = text;
        for (int i = 0; i < 4; i++) {
            if (i) *at++ = '.';
            const unsigned v = p.addr[i];
            if (v >= 100) *at++ = static_cast<char>('0' + v / 100);
            if (v >= 10) *at++ = static_cast<char>('0' + v / 10 % 10);
            *at++ = static_cast<char>('0' + v % 10);
        }
        out.append(text, static_cast<size_t>(at - text));
    } else {
        char text[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, p.addr.data(), text, sizeof(text));
        out += text;
    }
    out += '/';
    out += std::to_string(p.length);
    out += '\n';
}

}  // namespace

Result<PrefixList> parse_prefix_list(std::string_view content, std::string_view name) {
    const auto at_line = [&name](uint32_t line, const std::string& what) {
        return Error{std::string(name) + ":" + std::to_string(line) + ": " + what};
    };
    PrefixList list;
    // One entry per line at most: reserved, so a million lines grow no vector.
    list.entries.reserve(static_cast<size_t>(std::count(content.begin(), content.end(), '\n')) + 1);
    uint32_t line = 0;
    size_t start = 0;
    while (start < content.size()) {
        size_t end = content.find('\n', start);
        if (end == std::string_view::npos) end = content.size();
        std::string_view text = content.substr(start, end - start);
        start = end + 1;
        line++;
        if (text.find('\0') != std::string_view::npos)
            return at_line(line, "a NUL byte: this is not a text file of prefixes");
        if (const size_t comment = text.find_first_of("#;"); comment != std::string_view::npos)
            text = text.substr(0, comment);
        while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
        while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
        if (text.empty()) continue;
        if (std::any_of(text.begin(), text.end(), is_space))
            return at_line(line, "\"" + std::string(text) +
                                     "\": expected one prefix per line (a comment starts with # or ;)");
        PrefixListEntry entry;
        entry.line = line;
        if (auto parsed = parse_token(text, entry.prefix); !parsed) return at_line(line, parsed.error().message);
        list.entries.push_back(entry);
    }

    // Lists are often published sorted, and the store keeps them sorted.
    const auto less = [](const PrefixListEntry& a, const PrefixListEntry& b) { return prefix_less(a.prefix, b.prefix); };
    if (!std::is_sorted(list.entries.begin(), list.entries.end(), less))
        std::sort(list.entries.begin(), list.entries.end(), less);
    for (size_t i = 1; i < list.entries.size(); i++) {
        const PrefixListEntry& a = list.entries[i - 1];
        const PrefixListEntry& b = list.entries[i];
        if (!prefix_less(a.prefix, b.prefix))
            return at_line(std::max(a.line, b.line), prefix_text(b.prefix) + " is listed twice (also at line " +
                                                         std::to_string(std::min(a.line, b.line)) + ")");
    }
    list.canonical.reserve(list.entries.size() * 20);
    for (const PrefixListEntry& entry : list.entries) append_prefix(list.canonical, entry.prefix);
    list.sha256 = sha256_hex(list.canonical);
    return list;
}

Result<std::string> read_prefix_list_file(const std::string& path) {
    const auto failure = [&path](std::string_view doing) {
        return Error{"cannot " + std::string(doing) + " " + path + ": " + std::strerror(errno)};
    };
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return failure("open");
    struct stat info {};
    if (fstat(fd.get(), &info) != 0) return failure("stat");
    if (S_ISDIR(info.st_mode)) return Error{path + " is a directory, not a prefix-list file"};
    std::string content;
    if (S_ISREG(info.st_mode) && static_cast<uint64_t>(info.st_size) <= kMaxPrefixListBytes)
        content.reserve(static_cast<size_t>(info.st_size));
    char buffer[1 << 16];
    for (;;) {
        const ssize_t got = ::read(fd.get(), buffer, sizeof(buffer));
        if (got < 0) {
            if (errno == EINTR) continue;
            return failure("read");
        }
        if (got == 0) break;
        content.append(buffer, static_cast<size_t>(got));
        if (content.size() > kMaxPrefixListBytes)
            return Error{path + ": larger than " + std::to_string(kMaxPrefixListBytes >> 20) +
                         " MiB; not a prefix-list file"};
    }
    return content;
}

std::string list_trailer(const std::map<std::string, const PrefixList*>& lists) {
    std::string trailer;
    for (const auto& [name, list] : lists)
        trailer += std::string(kTrailerStart) + nlohmann::json(name).dump() + " sha256=" + list->sha256 +
                   " prefixes=" + std::to_string(list->entries.size()) + "\n";
    return trailer;
}

Result<std::map<std::string, std::string>> lists_in_trailer(std::string_view canonical) {
    std::map<std::string, std::string> lists;
    size_t start = 0;
    while (start < canonical.size()) {
        size_t end = canonical.find('\n', start);
        if (end == std::string_view::npos) end = canonical.size();
        const std::string_view line = canonical.substr(start, end - start);
        start = end + 1;
        if (line.substr(0, kTrailerStart.size()) != kTrailerStart) continue;
        const std::string_view rest = line.substr(kTrailerStart.size());
        const size_t sha_at = rest.rfind(" sha256=");
        const size_t count_at = rest.rfind(" prefixes=");
        const nlohmann::json name =
            sha_at == std::string_view::npos ? nlohmann::json() : nlohmann::json::parse(rest.substr(0, sha_at), nullptr, false);
        if (!name.is_string() || count_at == std::string_view::npos || count_at < sha_at ||
            count_at - sha_at - 8 != 64)
            return Error{"malformed list line in a canonical policy: " + std::string(line)};
        lists[name.get<std::string>()] = std::string(rest.substr(sha_at + 8, 64));
    }
    return lists;
}

}  // namespace sluice
