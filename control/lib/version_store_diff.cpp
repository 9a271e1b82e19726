// SPDX-License-Identifier: Apache-2.0
// diff_policies: a unified-style line diff of two versions' canonical texts,
// for `sluicectl policy diff`. Apart from version_store.cpp because it is a text
// algorithm (common prefix and suffix, then a longest-common-subsequence table)
// that needs nothing of the store but the two texts.
#include <algorithm>
#include <string_view>
#include <vector>

#include "version_store.h"

namespace sluice {
namespace {

constexpr size_t kDiffContext = 3;
// Above this many line pairs the diff stops looking for common lines in the
// changed middle and shows it as all removed, all added: still correct, and a
// policy that large changing wholesale is unusual.
constexpr size_t kMaxDiffCells = 4'000'000;

struct DiffOp {
    char kind;         // ' ', '-' or '+'
    size_t from_line;  // lines of `from` before this one
    size_t to_line;    // lines of `to` before this one
    std::string_view text;
};

std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    while (!text.empty()) {
        const size_t end = text.find('\n');
        lines.push_back(text.substr(0, end));
        if (end == std::string_view::npos) break;
        text.remove_prefix(end + 1);
    }
    return lines;
}

// The edit script between two line lists: common prefix and suffix, then a
// longest-common-subsequence table over what is left.
std::vector<DiffOp> edit_script(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
    size_t prefix = 0;
    while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) prefix++;
    size_t suffix = 0;
    while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
           a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix])
        suffix++;
    const size_t n = a.size() - prefix - suffix;
    const size_t m = b.size() - prefix - suffix;

    std::vector<DiffOp> ops;
    size_t i = 0, j = 0;  // positions in a and b
    auto emit = [&](char kind) {
        ops.push_back(DiffOp{kind, i, j, kind == '+' ? b[j] : a[i]});
        if (kind != '+') i++;
        if (kind != '-') j++;
    };
    while (i < prefix) emit(' ');
    if (n > 0 && m > 0 && (n + 1) * (m + 1) <= kMaxDiffCells) {
        // common[x][y]: LCS length of a[prefix+x..] and b[prefix+y..] within the middle.
        std::vector<uint32_t> common((n + 1) * (m + 1), 0);
        auto at = [&](size_t x, size_t y) -> uint32_t& { return common[x * (m + 1) + y]; };
        for (size_t x = n; x-- > 0;)
            for (size_t y = m; y-- > 0;)
                at(x, y) = a[prefix + x] == b[prefix + y] ? at(x + 1, y + 1) + 1 : std::max(at(x + 1, y), at(x, y + 1));
        size_t x = 0, y = 0;
        while (x < n || y < m) {
            if (x < n && y < m && a[prefix + x] == b[prefix + y]) {
                emit(' ');
                x++, y++;
            } else if (y == m || (x < n && at(x + 1, y) >= at(x, y + 1))) {
                emit('-');
                x++;
            } else {
                emit('+');
                y++;
            }
        }
    } else {
        for (size_t x = 0; x < n; x++) emit('-');
        for (size_t y = 0; y < m; y++) emit('+');
    }
    while (i < a.size()) emit(' ');
    return ops;
}

std::string hunk_range(size_t before, size_t count) {
    // Unified format: a range with no lines names the line before it.
    return std::to_string(count == 0 ? before : before + 1) + "," + std::to_string(count);
}

}  // namespace

std::string diff_policies(const PolicyVersion& from, const PolicyVersion& to) {
    const auto a = split_lines(from.canonical);
    const auto b = split_lines(to.canonical);
    const std::vector<DiffOp> ops = edit_script(a, b);

    std::vector<size_t> changes;
    for (size_t k = 0; k < ops.size(); k++)
        if (ops[k].kind != ' ') changes.push_back(k);
    if (changes.empty()) return {};

    std::string out =
        "--- version " + std::to_string(from.version) + "\n+++ version " + std::to_string(to.version) + "\n";
    size_t c = 0;
    while (c < changes.size()) {
        // A hunk runs while the unchanged gap to the next change fits in the context on both sides.
        size_t last = c;
        while (last + 1 < changes.size() && changes[last + 1] - changes[last] <= 2 * kDiffContext + 1) last++;
        const size_t begin = changes[c] >= kDiffContext ? changes[c] - kDiffContext : 0;
        const size_t end = std::min(ops.size(), changes[last] + kDiffContext + 1);
        size_t from_count = 0, to_count = 0;
        for (size_t k = begin; k < end; k++) {
            if (ops[k].kind != '+') from_count++;
            if (ops[k].kind != '-') to_count++;
        }
        out += "@@ -" + hunk_range(ops[begin].from_line, from_count) + " +" + hunk_range(ops[begin].to_line, to_count) +
               " @@\n";
        for (size_t k = begin; k < end; k++) {
            out += ops[k].kind;
            out += ops[k].text;
            out += '\n';
        }
        c = last + 1;
    }
    return out;
}

}  // namespace sluice
