// SPDX-License-Identifier: Apache-2.0
#include "redis_client.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <array>
#include <charconv>
#include <map>
#include <optional>
#include <utility>

namespace sluice::fleet {
namespace {

constexpr size_t kSlots = 16384;
constexpr uint16_t kNoNode = 0xFFFF;

struct ContextDeleter {
    void operator()(redisContext* context) const { redisFree(context); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

struct ReplyDeleter {
    void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(std::chrono::milliseconds ms) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
    return tv;
}

RedisReply convert(const redisReply& raw) {
    RedisReply reply;
    switch (raw.type) {
        case REDIS_REPLY_STRING:
            reply.type = RedisReplyType::string;
            break;
        case REDIS_REPLY_STATUS:
            reply.type = RedisReplyType::status;
            break;
        case REDIS_REPLY_ERROR:
            reply.type = RedisReplyType::error;
            break;
        case REDIS_REPLY_INTEGER:
            reply.type = RedisReplyType::integer;
            reply.integer = raw.integer;
            break;
        case REDIS_REPLY_ARRAY:
            reply.type = RedisReplyType::array;
            reply.elements.reserve(raw.elements);
            for (size_t i = 0; i < raw.elements; ++i) reply.elements.push_back(convert(*raw.element[i]));
            break;
        default:
            reply.type = RedisReplyType::nil;
            break;
    }
    if (raw.str != nullptr && reply.type != RedisReplyType::integer) reply.str.assign(raw.str, raw.len);
    return reply;
}

std::string error_word(const std::string& text) { return text.substr(0, text.find(' ')); }

bool ipv6_literal(std::string_view host) {
    in6_addr address{};
    return host.size() < INET6_ADDRSTRLEN && inet_pton(AF_INET6, std::string(host).c_str(), &address) == 1;
}

// A DNS name or an IPv4 address: what getaddrinfo can take unbracketed.
bool plain_host(std::string_view host) {
    return !host.empty() && host.find_first_not_of(
                                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789.-_") == std::string_view::npos;
}

// "MOVED 3999 127.0.0.1:6381" / "ASK ...": Redis writes IPv6 addresses
// without brackets, so the port is after the last colon.
std::optional<RedisEndpoint> redirect_target(const std::string& text) {
    const size_t space = text.rfind(' ');
    if (space == std::string::npos) return std::nullopt;
    const std::string address = text.substr(space + 1);
    if (!address.empty() && address.front() == '[') {
        auto parsed = parse_redis_endpoint(address);
        return parsed ? std::optional(parsed.value()) : std::nullopt;
    }
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0) return std::nullopt;
    const std::string_view host(address.data(), colon);
    if (!plain_host(host) && !ipv6_literal(host)) return std::nullopt;
    unsigned port = 0;
    const char* begin = address.data() + colon + 1;
    const char* end = address.data() + address.size();
    const auto [ptr, ec] = std::from_chars(begin, end, port);
    if (ec != std::errc() || ptr != end || port == 0 || port > 65535) return std::nullopt;
    return RedisEndpoint{address.substr(0, colon), static_cast<uint16_t>(port)};
}

// hiredis 0.14 allocates an array's element pointers as soon as it reads the
// "*N" header, so one reply from a broken or hostile server could cost
// gigabytes (the redis_reply fuzzer's "*3490000000": 2.8 GB). No reply Sluice
// reads comes near this many elements; a larger one fails the command.
constexpr int kMaxReplyElements = 1 << 16;

void bound_reply_arrays(redisContext* context) {
    static redisReplyObjectFunctions* const hiredis_own = context->reader->fn;
    static redisReplyObjectFunctions bounded = [] {
        redisReplyObjectFunctions functions = *hiredis_own;
        functions.createArray = [](const redisReadTask* task, int elements) -> void* {
            return elements > kMaxReplyElements ? nullptr : hiredis_own->createArray(task, elements);
        };
        return functions;
    }();
    context->reader->fn = &bounded;
}

Error redis_error(const RedisEndpoint& node, const std::string& what, ErrorCode code) {
    return Error{.message = "redis " + format_redis_endpoint(node) + ": " + what, .setting = {}, .code = code};
}

}  // namespace

Result<RedisEndpoint> parse_redis_endpoint(std::string_view text) {
    const std::string quoted = "redis server \"" + std::string(text) + "\": ";
    std::string_view host;
    std::string_view port_text;
    const bool bracketed = !text.empty() && text.front() == '[';
    if (bracketed) {
        const size_t close = text.find(']');
        if (close == std::string_view::npos) return Error{quoted + "no ']' after the IPv6 address", "servers"};
        host = text.substr(1, close - 1);
        if (close + 1 >= text.size() || text[close + 1] != ':')
            return Error{quoted + "expected \":port\" after the ']'", "servers"};
        port_text = text.substr(close + 2);
    } else {
        const size_t colon = text.find(':');
        if (colon == std::string_view::npos) return Error{quoted + "expected host:port", "servers"};
        if (text.find(':', colon + 1) != std::string_view::npos)
            return Error{quoted + "an IPv6 address needs brackets: [address]:port", "servers"};
        host = text.substr(0, colon);
        port_text = text.substr(colon + 1);
    }
    if (host.empty()) return Error{quoted + "the host is empty", "servers"};
    if (bracketed && !ipv6_literal(host)) return Error{quoted + "the bracketed host is not an IPv6 address", "servers"};
    if (!bracketed && !plain_host(host))
        return Error{
            quoted + "the host may hold only letters, digits, '.', '-' and '_' (an IPv6 address goes in brackets)",
            "servers"};
    unsigned port = 0;
    const auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() || port == 0 ||
        port > 65535)
        return Error{quoted + "the port must be a number in 1..65535", "servers"};
    return RedisEndpoint{std::string(host), static_cast<uint16_t>(port)};
}

std::string format_redis_endpoint(const RedisEndpoint& endpoint) {
    const bool v6 = endpoint.host.find(':') != std::string::npos;
    return (v6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port);
}

uint16_t redis_crc16(std::string_view bytes) {
    // Bitwise CRC16/XMODEM (poly 0x1021, init 0): a command's key is short,
    // so a table buys nothing worth its 512 bytes.
    uint16_t crc = 0;
    for (const char c : bytes) {
        crc ^= static_cast<uint16_t>(static_cast<uint8_t>(c) << 8);
        for (int bit = 0; bit < 8; ++bit)
            crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
    }
    return crc;
}

uint16_t redis_key_slot(std::string_view key) {
    const size_t open = key.find('{');
    if (open != std::string_view::npos) {
        const size_t close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
    }
    return static_cast<uint16_t>(redis_crc16(key) % kSlots);
}

struct RedisClient::State {
    enum class Mode { unknown, single, cluster };

    RedisOptions options;
    Mode mode = Mode::unknown;
    std::map<std::string, ContextPtr> connections;  // by format_redis_endpoint
    RedisEndpoint single;                           // single mode: the one server
    std::vector<RedisEndpoint> nodes;               // cluster mode: masters, indexed by slots
    std::vector<uint16_t> slots;                    // slot -> index in nodes, or kNoNode
    bool map_stale = false;
    RedisEndpoint last_node;
    std::string last_error_code;
    RedisClientStats stats;

    explicit State(RedisOptions o) : options(std::move(o)) {}

    Result<redisContext*> connection(const RedisEndpoint& node) {
        const std::string name = format_redis_endpoint(node);
        if (auto it = connections.find(name); it != connections.end()) return it->second.get();
        ContextPtr context(redisConnectWithTimeout(node.host.c_str(), node.port, to_timeval(options.connect_timeout)));
        if (!context) return redis_error(node, "connect: out of memory", ErrorCode::internal);
        if (context->err != 0)
            return redis_error(node, std::string("connect: ") + context->errstr, ErrorCode::unreachable);
        bound_reply_arrays(context.get());
        if (redisSetTimeout(context.get(), to_timeval(options.command_timeout)) != REDIS_OK)
            return redis_error(node, "cannot set the command timeout", ErrorCode::unreachable);
        if (!options.password.empty()) {
            std::vector<std::string> auth{"AUTH"};
            if (!options.username.empty()) auth.push_back(options.username);
            auth.push_back(options.password);
            auto reply = round_trip(context.get(), node, auth);
            if (!reply) return reply.error();
            if (reply.value().type == RedisReplyType::error)
                return redis_error(node, "AUTH refused: " + reply.value().str, ErrorCode::permission_denied);
        }
        ++stats.connects;
        redisContext* raw = context.get();
        connections.emplace(name, std::move(context));
        return raw;
    }

    void drop(const RedisEndpoint& node) { connections.erase(format_redis_endpoint(node)); }

    // One command on one connection. A Redis error reply is a reply here;
    // only I/O failures are errors.
    Result<RedisReply> round_trip(redisContext* context, const RedisEndpoint& node,
                                  const std::vector<std::string>& argv) {
        std::vector<const char*> args;
        std::vector<size_t> lengths;
        args.reserve(argv.size());
        lengths.reserve(argv.size());
        for (const auto& arg : argv) {
            args.push_back(arg.data());
            lengths.push_back(arg.size());
        }
        ReplyPtr raw(static_cast<redisReply*>(
            redisCommandArgv(context, static_cast<int>(args.size()), args.data(), lengths.data())));
        if (!raw) {
            std::string what = context->errstr[0] != '\0' ? context->errstr : "no reply";
            if (context->err == REDIS_ERR_IO)
                what += " (command timeout " + std::to_string(options.command_timeout.count()) + " ms)";
            if (context->err == REDIS_ERR_OOM)
                what += " (or a reply array above " + std::to_string(kMaxReplyElements) + " elements)";
            return redis_error(node, argv.front() + ": " + what, ErrorCode::unreachable);
        }
        return convert(*raw);
    }

    // argv at node, preceded by ASKING when asked to; drops the connection on failure.
    Result<RedisReply> send(const RedisEndpoint& node, const std::vector<std::string>& argv, bool asking) {
        last_node = node;
        auto context = connection(node);
        if (!context) return context.error();
        if (asking) {
            auto reply = round_trip(context.value(), node, {"ASKING"});
            if (!reply) {
                drop(node);
                return reply.error();
            }
        }
        auto reply = round_trip(context.value(), node, argv);
        if (!reply) drop(node);
        return reply;
    }

    Result<RedisReply> reply_or_error(const RedisEndpoint& node, RedisReply reply) {
        if (reply.type != RedisReplyType::error) return reply;
        last_error_code = error_word(reply.str);
        return redis_error(node, reply.str, ErrorCode::internal);
    }

    // Loads CLUSTER SLOTS from `from`. Returns whether it was a slot table.
    Status load_slots(const RedisEndpoint& from, const RedisReply& reply) {
        if (reply.type != RedisReplyType::array || reply.elements.empty())
            return redis_error(from, "CLUSTER SLOTS: no slots assigned", ErrorCode::internal);
        std::vector<RedisEndpoint> new_nodes;
        std::vector<uint16_t> new_slots(kSlots, kNoNode);
        for (const auto& range : reply.elements) {
            if (range.type != RedisReplyType::array || range.elements.size() < 3 ||
                range.elements[0].type != RedisReplyType::integer ||
                range.elements[1].type != RedisReplyType::integer || range.elements[2].type != RedisReplyType::array ||
                range.elements[2].elements.size() < 2 || range.elements[2].elements[1].type != RedisReplyType::integer)
                return redis_error(from, "CLUSTER SLOTS: unexpected reply shape", ErrorCode::internal);
            const auto& master = range.elements[2].elements;
            // An empty host means "the address you reached me at".
            RedisEndpoint node{master[0].str.empty() ? from.host : master[0].str,
                               static_cast<uint16_t>(master[1].integer)};
            size_t index = 0;
            while (index < new_nodes.size() && !(new_nodes[index] == node)) ++index;
            if (index == new_nodes.size()) new_nodes.push_back(node);
            const long long first = range.elements[0].integer;
            const long long last = range.elements[1].integer;
            if (first < 0 || last >= static_cast<long long>(kSlots) || first > last)
                return redis_error(from, "CLUSTER SLOTS: slot range out of bounds", ErrorCode::internal);
            for (long long slot = first; slot <= last; ++slot)
                new_slots[static_cast<size_t>(slot)] = static_cast<uint16_t>(index);
        }
        nodes = std::move(new_nodes);
        slots = std::move(new_slots);
        map_stale = false;
        ++stats.slot_map_refreshes;
        return ok_status();
    }

    void point_slot(uint16_t slot, const RedisEndpoint& node) {
        size_t index = 0;
        while (index < nodes.size() && !(nodes[index] == node)) ++index;
        if (index == nodes.size()) nodes.push_back(node);
        slots[slot] = static_cast<uint16_t>(index);
    }

    // Finds the mode on the first command: the first server that answers decides.
    Status detect() {
        std::optional<Error> last;
        for (const auto& server : options.servers) {
            auto reply = send(server, {"CLUSTER", "SLOTS"}, false);
            if (!reply) {
                last = reply.error();
                continue;
            }
            const RedisReply& r = reply.value();
            if (r.type == RedisReplyType::error) {
                if (r.str.find("cluster support disabled") != std::string::npos ||
                    r.str.find("unknown command") != std::string::npos) {
                    single = server;
                    mode = Mode::single;
                    return ok_status();
                }
                return redis_error(server, "CLUSTER SLOTS: " + r.str, ErrorCode::internal);
            }
            auto loaded = load_slots(server, r);
            if (!loaded) return loaded;
            mode = Mode::cluster;
            return ok_status();
        }
        if (last) return *last;
        return Error{"redis: no servers configured", "servers", ErrorCode::invalid};
    }

    // Reloads the map from `hint` first, then the known masters and the seeds.
    Status refresh(const std::optional<RedisEndpoint>& hint) {
        std::vector<RedisEndpoint> candidates;
        if (hint) candidates.push_back(*hint);
        candidates.insert(candidates.end(), nodes.begin(), nodes.end());
        candidates.insert(candidates.end(), options.servers.begin(), options.servers.end());
        std::optional<Error> last;
        for (const auto& node : candidates) {
            auto reply = send(node, {"CLUSTER", "SLOTS"}, false);
            if (!reply) {
                last = reply.error();
                continue;
            }
            if (reply.value().type == RedisReplyType::error) {
                last = redis_error(node, "CLUSTER SLOTS: " + reply.value().str, ErrorCode::internal);
                continue;
            }
            auto loaded = load_slots(node, reply.value());
            if (loaded) return loaded;
            last = loaded.error();
        }
        map_stale = true;
        return last ? *last : Error{"redis: no cluster node to ask for slots", "servers", ErrorCode::unreachable};
    }

    Result<RedisReply> cluster_command(const std::vector<std::string>& argv, std::string_view key) {
        if (map_stale) (void)refresh(std::nullopt);  // a failed refresh keeps the old map
        const uint16_t slot = redis_key_slot(key);
        if (slots[slot] == kNoNode) {
            map_stale = true;
            return Error{"redis cluster: slot " + std::to_string(slot) + " has no master", {}, ErrorCode::unreachable};
        }
        RedisEndpoint target = nodes[slots[slot]];
        bool asking = false;
        for (int redirections = 0;; ++redirections) {
            auto sent = send(target, argv, asking);
            if (!sent) {
                map_stale = true;  // the node may be gone or failed over
                return sent.error();
            }
            RedisReply& reply = sent.value();
            const bool moved = reply.type == RedisReplyType::error && reply.str.starts_with("MOVED ");
            const bool ask = reply.type == RedisReplyType::error && reply.str.starts_with("ASK ");
            if (!moved && !ask) return reply_or_error(target, std::move(reply));
            const auto to = redirect_target(reply.str);
            if (!to) return redis_error(target, "unreadable redirection: " + reply.str, ErrorCode::internal);
            if (redirections == kMaxRedirections)
                return redis_error(target,
                                   "more than " + std::to_string(kMaxRedirections) + " redirections for slot " +
                                       std::to_string(slot) + "; last: " + reply.str,
                                   ErrorCode::internal);
            if (moved) {
                ++stats.moved;
                if (!refresh(*to)) point_slot(slot, *to);  // the map we had, with this slot fixed
                target = *to;
                asking = false;
            } else {
                ++stats.asks;
                target = *to;
                asking = true;
            }
        }
    }
};

RedisClient::RedisClient(RedisOptions options) : state_(std::make_unique<State>(std::move(options))) {}
RedisClient::~RedisClient() = default;
RedisClient::RedisClient(RedisClient&&) noexcept = default;
RedisClient& RedisClient::operator=(RedisClient&&) noexcept = default;

Result<RedisReply> RedisClient::command(const std::vector<std::string>& argv, std::string_view routing_key) {
    State& s = *state_;
    s.last_error_code.clear();
    if (argv.empty()) return Error{"redis: empty command", {}, ErrorCode::invalid};
    if (s.mode == State::Mode::unknown) {
        auto detected = s.detect();
        if (!detected) return detected.error();
    }
    if (s.mode == State::Mode::cluster) return s.cluster_command(argv, routing_key);
    auto reply = s.send(s.single, argv, false);
    if (!reply) return reply.error();
    return s.reply_or_error(s.single, std::move(reply.value()));
}

Result<RedisReply> RedisClient::command_at(const RedisEndpoint& node, const std::vector<std::string>& argv) {
    State& s = *state_;
    s.last_error_code.clear();
    if (argv.empty()) return Error{"redis: empty command", {}, ErrorCode::invalid};
    auto reply = s.send(node, argv, false);
    if (!reply) return reply.error();
    return s.reply_or_error(node, std::move(reply.value()));
}

const RedisEndpoint& RedisClient::last_node() const { return state_->last_node; }
const std::string& RedisClient::last_error_code() const { return state_->last_error_code; }
bool RedisClient::cluster_mode() const { return state_->mode == State::Mode::cluster; }
const RedisClientStats& RedisClient::stats() const { return state_->stats; }

}  // namespace sluice::fleet
