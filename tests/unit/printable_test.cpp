// SPDX-License-Identifier: Apache-2.0
// printable_line / printable_text: what a client sent, made safe for a terminal.
#include <gtest/gtest.h>

#include <string>

#include "printable.h"

namespace sluice {
namespace {

TEST(Printable, ControlBytesBecomeEscapes) {
    EXPECT_EQ(printable_line("evil\x1b[2J\x1b[31mRED\x07"), R"(evil\x1b[2J\x1b[31mRED\x07)");
    EXPECT_EQ(printable_line(std::string("a\0b\x7f", 4)), R"(a\x00b\x7f)");
    EXPECT_EQ(printable_line("a\r\n\tb\\c"), R"(a\r\n\tb\\c)") << "one line: an escape always means one in the input";
    EXPECT_EQ(printable_text("a\r\n\tb\\c\x1b"), "a\\r\n\tb\\c\\x1b") << "several lines keep their layout";
}

TEST(Printable, BytesThatAreNotUtf8AreEscapedOneByOne) {
    EXPECT_EQ(printable_line("\xff"), R"(\xff)");
    EXPECT_EQ(printable_line("\xc0\xaf"), R"(\xc0\xaf)") << "overlong '/'";
    EXPECT_EQ(printable_line("\xed\xa0\x80"), R"(\xed\xa0\x80)") << "a surrogate";
    EXPECT_EQ(printable_line("\xf4\x90\x80\x80"), R"(\xf4\x90\x80\x80)") << "past U+10FFFF";
    EXPECT_EQ(printable_line("\xe2\x82"), R"(\xe2\x82)") << "cut short";
    EXPECT_EQ(printable_line("\xe2\x82x"), R"(\xe2\x82x)") << "cut short by ASCII";
    EXPECT_EQ(printable_line("\x80"), R"(\x80)") << "a continuation byte alone";
}

TEST(Printable, CharactersThatActOnTheTerminalOrTheLineOrderAreEscaped) {
    EXPECT_EQ(printable_line("\xc2\x9b" "31m"), R"(\u{009b}31m)") << "C1 CSI";
    EXPECT_EQ(printable_line("\xc2\x85"), R"(\u{0085})") << "C1 NEL";
    EXPECT_EQ(printable_line("abc\xe2\x80\xae" "cba"), R"(abc\u{202e}cba)") << "right-to-left override";
    EXPECT_EQ(printable_line("\xe2\x81\xa6"), R"(\u{2066})") << "left-to-right isolate";
    EXPECT_EQ(printable_line("\xe2\x80\xa8"), R"(\u{2028})") << "line separator";
}

TEST(Printable, LettersOfEveryScriptAreKept) {
    const std::string text = "Gr\xc3\xbc\xc3\x9f" "e \xe6\x9d\xb1\xe4\xba\xac \xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d \xf0\x9f\x9a\x80";
    EXPECT_EQ(printable_line(text), text);
    EXPECT_EQ(printable_text(text), text);
}

// Every string of one or two bytes: nothing that acts on a terminal is left.
TEST(Printable, NoTwoByteInputLeavesAControlInTheOutput) {
    for (int a = 0; a < 256; a++) {
        for (int b = -1; b < 256; b++) {
            std::string input(1, static_cast<char>(a));
            if (b >= 0) input += static_cast<char>(b);
            const std::string out = printable_line(input);
            for (size_t i = 0; i < out.size(); i++) {
                const auto byte = static_cast<unsigned char>(out[i]);
                const auto next = i + 1 < out.size() ? static_cast<unsigned char>(out[i + 1]) : 0;
                ASSERT_FALSE(byte < 0x20 || byte == 0x7F || (byte == 0xC2 && next < 0xA0 && next >= 0x80))
                    << "input " << a << "," << b << " left byte " << int{byte};
                ASSERT_FALSE(byte >= 0x80 && out != input) << "input " << a << "," << b << ": a raw byte among escapes";
            }
        }
    }
}

}  // namespace
}  // namespace sluice
