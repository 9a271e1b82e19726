// SPDX-License-Identifier: Apache-2.0
// Text that came from outside (request keys, tenant names, addresses, ban
// reasons, policy files) made safe to print on an operator's terminal: a
// byte or character that could move the cursor, recolour, clear the screen,
// reorder the line (bidi overrides) or is not UTF-8 is written as an escape
// instead. Valid UTF-8 letters of any script are kept as they are.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// One line: for a table cell or a logfmt value. Also escapes newline (\n),
// tab (\t), carriage return (\r) and the backslash (\\), so that an escape in
// the output always means one in the input.
std::string printable_line(std::string_view text);

// Several lines: a policy file, a diff, an error message. Keeps newlines,
// tabs and backslashes; escapes the rest as printable_line does.
std::string printable_text(std::string_view text);

}  // namespace sluice
