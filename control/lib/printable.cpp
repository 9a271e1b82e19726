// SPDX-License-Identifier: Apache-2.0
#include "printable.h"

#include <cstddef>
#include <cstdio>

namespace sluice {
namespace {

// The length of the well-formed UTF-8 sequence `text` starts with (RFC 3629:
// no overlong forms, no surrogates, nothing past U+10FFFF), 0 if there is
// none; its code point in *code_point.
size_t utf8_sequence(std::string_view text, char32_t* code_point) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(0);
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the second byte's range
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else {
        return 0;
    }
    if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
    char32_t cp = lead & (0x7F >> length);
    for (size_t i = 1; i < length; i++) {
        if (i > 1 && (byte(i) < 0x80 || byte(i) > 0xBF)) return 0;
        cp = (cp << 6) | (byte(i) & 0x3F);
    }
    *code_point = cp;
    return length;
}

// Characters that are valid but act on the terminal or the line's order:
// C1 controls (U+009B is CSI on some terminals), the bidi marks, embeddings,
// overrides and isolates, and the line and paragraph separators.
bool acts_on_the_terminal(char32_t cp) {
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
           (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

void append_hex_byte(std::string& out, unsigned char byte) {
    char escaped[5];
    std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
    out += escaped;
}

std::string escape(std::string_view text, bool one_line) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte >= 0x80) {
            char32_t cp = 0;
            const size_t length = utf8_sequence(text.substr(i), &cp);
            if (length == 0) {
                append_hex_byte(out, byte);
                i++;
            } else if (acts_on_the_terminal(cp)) {
                char escaped[16];
                std::snprintf(escaped, sizeof(escaped), "\\u{%04x}", static_cast<unsigned>(cp));
                out += escaped;
                i += length;
            } else {
                out.append(text.substr(i, length));
                i += length;
            }
            continue;
        }
        i++;
        if (byte == '\n' || byte == '\t' || byte == '\\') {
            if (!one_line) {
                out += static_cast<char>(byte);
                continue;
            }
            out += byte == '\n' ? "\\n" : byte == '\t' ? "\\t" : "\\\\";
        } else if (byte == '\r') {
            out += "\\r";
        } else if (byte < 0x20 || byte == 0x7F) {
            append_hex_byte(out, byte);
        } else {
            out += static_cast<char>(byte);
        }
    }
    return out;
}

}  // namespace

std::string printable_line(std::string_view text) { return escape(text, true); }

std::string printable_text(std::string_view text) { return escape(text, false); }

}  // namespace sluice
