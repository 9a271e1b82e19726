// SPDX-License-Identifier: Apache-2.0
#include "hot_sources.h"

#include <cstring>

namespace sluice {

bool HotSources::SourceVerdict::operator==(const SourceVerdict& other) const {
    return key.class_id == other.key.class_id && key.family == other.key.family && verdict == other.verdict &&
           std::memcmp(key.addr, other.key.addr, sizeof(key.addr)) == 0;
}

void HotSources::add(const sluice_source_key& key, double weight, double now_s, uint8_t verdict) {
    top_.add(SourceVerdict{key, verdict}, weight, now_s);
}

std::vector<HotSource> HotSources::top(size_t k, double now_s, double min_rate) const {
    std::vector<HotSource> out;
    for (const auto& ranked : top_.top(k, now_s, min_rate))
        out.push_back(HotSource{ranked.key.key, ranked.per_second, ranked.decayed, ranked.share,
                                ranked.error_per_second, ranked.key.verdict});
    return out;
}

}  // namespace sluice
