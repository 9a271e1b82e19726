// SPDX-License-Identifier: Apache-2.0
#include "interface_host.h"

namespace sluice {

std::string_view xdp_mode_name(XdpMode mode) { return mode == XdpMode::native ? "native" : "generic"; }

Result<XdpMode> parse_xdp_mode(std::string_view name) {
    if (name == "native") return XdpMode::native;
    if (name == "generic") return XdpMode::generic;
    return Error{"\"" + std::string(name) + "\" is not an XDP mode (expected native or generic)", "mode"};
}

}  // namespace sluice
