#include "p2p/peer_record.h"

#include "p2p/identity.h"
#include "p2p/identity_work.h"

#include <libtorrent/bdecode.hpp>
#include <libtorrent/bencode.hpp>
#include <libtorrent/entry.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>

namespace es::p2p {
namespace {

using Int = lt::entry::integer_type;

// libtorrent's string_view is boost's; these bridge to the standard one.
std::string_view stdView(lt::string_view v) { return {v.data(), v.size()}; }
lt::string_view ltView(std::string_view v) { return {v.data(), v.size()}; }

std::string bytesOf(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

lt::entry roundMap(const std::map<std::int64_t, std::string>& byRound) {
  lt::entry dict(lt::entry::dictionary_t);
  for (const auto& [round, value] : byRound) dict[std::to_string(round)] = value;
  return dict;
}

int hexDigit(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

// Lower-case hex (invalidValue checked it, or toHex made it) as the bytes it spells.
std::string hexBytes(const std::string& hex) {
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = char(hexDigit(hex[2 * i]) * 16 + hexDigit(hex[2 * i + 1]));
  return out;
}

// Info-hashes travel as their 20 or 32 bytes, not hex: seven of them (3 contributions, 2
// snapshots, 2 outputs) would cost 224 more bytes of the 1000.
lt::entry hashMap(const std::map<std::int64_t, std::string>& byRound) {
  lt::entry dict(lt::entry::dictionary_t);
  for (const auto& [round, infoHash] : byRound) dict[std::to_string(round)] = hexBytes(infoHash);
  return dict;
}

// `version` is a parameter so a parsed record can be re-encoded exactly as it claims to be
// (canonical check) before its version is judged.
lt::entry recordEntry(const PeerRecord& r, Int version) {
  lt::entry e(lt::entry::dictionary_t);
  e["v"] = version;
  e["run"] = r.run;
  e["pk"] = bytesOf(r.pk.data(), r.pk.size());
  e["seq"] = Int(r.seq);
  e["round"] = Int(r.round);
  lt::entry claims(lt::entry::list_t);
  for (const int c : r.claims) claims.list().emplace_back(Int(c));
  e["claims"] = std::move(claims);
  e["lease"] = Int(r.leaseUntil);
  e["contrib"] = hashMap(r.contrib);
  e["snapshot"] = hashMap(r.snapshot);
  e["merged"] = roundMap(r.merged);
  e["sets"] = roundMap(r.sets);
  e["outputs"] = hashMap(r.outputs);
  lt::entry stats(lt::entry::dictionary_t);
  stats["steps"] = Int(r.stats.steps);
  stats["tokens"] = Int(r.stats.tokens);
  stats["loss_e4"] = Int(r.stats.lossE4);
  stats["tps"] = Int(r.stats.tokensPerSecond);
  e["stats"] = std::move(stats);
  e["mem"] = Int(r.freeMemory);
  e["work"] = Int(r.work);
  return e;
}

std::string encode(const lt::entry& e) {
  std::string out;
  lt::bencode(std::back_inserter(out), e);
  return out;
}

std::string signedBytes(const PeerRecord& r, Int version, const Signature& sig) {
  lt::entry e = recordEntry(r, version);
  e["sig"] = bytesOf(sig.data(), sig.size());
  return encode(e);
}

bool isLowerHex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool isInfoHashHex(const std::string& s) {
  return (s.size() == 40 || s.size() == 64) && isLowerHex(s);  // v1 (SHA-1) or v2 (SHA-256) info-hash
}

// sync::stateFingerprint is 16 hex digits today; up to 64 leaves room for a longer hash.
bool isFingerprintHex(const std::string& s) { return s.size() >= 16 && s.size() <= 64 && isLowerHex(s); }

// Value rules shared by signRecord and parseRecord, so we never sign what others would refuse.
// Returns the offending field's description, or "".
std::string invalidValue(const PeerRecord& r) {
  if (r.seq < 0) return "\"seq\" is negative";
  if (r.round < 0) return "\"round\" is negative";
  if (r.leaseUntil < 0) return "\"lease\" is negative";
  if (r.freeMemory < 0) return "\"mem\" is negative";
  if (r.work < 0) return "\"work\" is negative";
  if (r.stats.steps < 0 || r.stats.tokens < 0 || r.stats.tokensPerSecond < 0) return "\"stats\" has a negative count";
  for (std::size_t i = 0; i < r.claims.size(); ++i) {
    if (r.claims[i] < 0) return "\"claims\" has a negative expert id";
    if (i > 0 && r.claims[i] <= r.claims[i - 1]) return "\"claims\" is not sorted and unique";
  }
  for (const auto* byRound : {&r.contrib, &r.snapshot, &r.outputs}) {
    const char* name = byRound == &r.contrib ? "\"contrib\"" : byRound == &r.snapshot ? "\"snapshot\"" : "\"outputs\"";
    for (const auto& [round, infoHash] : *byRound) {
      if (round < 0) return std::string(name) + " has a negative round";
      if (!isInfoHashHex(infoHash)) return std::string(name) + " value is not a lower-case info-hash hex";
    }
  }
  for (const auto* byRound : {&r.merged, &r.sets}) {
    const char* name = byRound == &r.merged ? "\"merged\"" : "\"sets\"";
    for (const auto& [round, fingerprint] : *byRound) {
      if (round < 0) return std::string(name) + " has a negative round";
      if (!isFingerprintHex(fingerprint)) return std::string(name) + " value is not a lower-case fingerprint hex";
    }
  }
  return {};
}

// Field extraction from the decoded tree. Each reports a Garbage detail naming the field.
class Reader {
 public:
  std::string error;

  bool onlyKeys(const lt::bdecode_node& dict, std::initializer_list<std::string_view> keys, const char* where) {
    for (int i = 0; i < dict.dict_size(); ++i) {
      const std::string_view key = stdView(dict.dict_at(i).first);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        return fail(std::string("unexpected field \"") + std::string(key) + "\"" + where);
      }
    }
    return true;
  }
  lt::bdecode_node field(const lt::bdecode_node& dict, std::string_view key, lt::bdecode_node::type_t type,
                         const char* typeName) {
    lt::bdecode_node node = dict.dict_find(ltView(key));
    if (!node) {
      fail("missing field \"" + std::string(key) + "\"");
    } else if (node.type() != type) {
      fail("field \"" + std::string(key) + "\" is not " + typeName);
    } else {
      return node;
    }
    return {};
  }
  std::int64_t integer(const lt::bdecode_node& dict, std::string_view key) {
    const auto node = field(dict, key, lt::bdecode_node::int_t, "an integer");
    return node ? node.int_value() : 0;
  }
  std::string string(const lt::bdecode_node& dict, std::string_view key) {
    const auto node = field(dict, key, lt::bdecode_node::string_t, "a string");
    return node ? std::string(stdView(node.string_value())) : std::string();
  }
  template <std::size_t N>
  std::array<std::uint8_t, N> fixedBytes(const lt::bdecode_node& dict, std::string_view key) {
    std::array<std::uint8_t, N> out{};
    const std::string s = string(dict, key);
    if (error.empty() && s.size() != N)
      fail("field \"" + std::string(key) + "\" is not " + std::to_string(N) + " bytes");
    else if (error.empty())
      std::memcpy(out.data(), s.data(), N);
    return out;
  }
  std::map<std::int64_t, std::string> roundMap(const lt::bdecode_node& dict, std::string_view key) {
    std::map<std::int64_t, std::string> out;
    const auto node = field(dict, key, lt::bdecode_node::dict_t, "a dictionary");
    const std::string where = "field \"" + std::string(key) + "\" has ";
    for (int i = 0; node && i < node.dict_size(); ++i) {
      const auto [ltName, value] = node.dict_at(i);
      const std::string name(stdView(ltName));
      // Up to 18 digits cannot overflow int64; leading zeros parse here and fail the canonical check.
      const bool decimal = !name.empty() && name.size() <= 18 &&
                           std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!decimal) {
        fail(where + "a key that is not a round number");
        break;
      }
      if (value.type() != lt::bdecode_node::string_t) {
        fail(where + "a value that is not a string");
        break;
      }
      out[std::stoll(name)] = std::string(stdView(value.string_value()));
    }
    return out;
  }
  // Values of 20 (v1) or 32 (v2) bytes, as lower-case hex.
  std::map<std::int64_t, std::string> hashMap(const lt::bdecode_node& dict, std::string_view key) {
    auto out = roundMap(dict, key);
    for (auto& [round, value] : out) {
      if (value.size() != 20 && value.size() != 32) {
        fail("field \"" + std::string(key) + "\" has a value that is not a 20- or 32-byte info-hash");
        break;
      }
      value = toHex(reinterpret_cast<const std::uint8_t*>(value.data()), value.size());
    }
    return out;
  }
  std::vector<int> claims(const lt::bdecode_node& dict) {
    std::vector<int> out;
    const auto node = field(dict, "claims", lt::bdecode_node::list_t, "a list");
    for (int i = 0; node && i < node.list_size(); ++i) {
      const auto item = node.list_at(i);
      const bool valid = item.type() == lt::bdecode_node::int_t && item.int_value() >= 0 &&
                         item.int_value() <= std::numeric_limits<int>::max();
      if (!valid) {
        fail("field \"claims\" has an item that is not an expert id");
        break;
      }
      out.push_back(static_cast<int>(item.int_value()));
    }
    return out;
  }

 private:
  bool fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }
};

// For details that quote peer-supplied bytes into logs.
std::string printable(const std::string& bytes) {
  std::string out = bytes.substr(0, 80);
  for (char& c : out)
    if (c < 0x20 || c > 0x7e) c = '?';
  return out;
}

ParsedRecord reject(RecordError error, std::string detail) {
  ParsedRecord parsed;
  parsed.rejection = {error, std::move(detail)};
  return parsed;
}

}  // namespace

bool PeerRecord::operator==(const PeerRecord& o) const {
  return run == o.run && pk == o.pk && seq == o.seq && round == o.round && claims == o.claims &&
         leaseUntil == o.leaseUntil && contrib == o.contrib && snapshot == o.snapshot && merged == o.merged &&
         sets == o.sets && outputs == o.outputs && stats.steps == o.stats.steps && stats.tokens == o.stats.tokens &&
         stats.lossE4 == o.stats.lossE4 && stats.tokensPerSecond == o.stats.tokensPerSecond &&
         freeMemory == o.freeMemory && work == o.work;
}

const char* recordErrorName(RecordError error) {
  switch (error) {
    case RecordError::Garbage:
      return "garbage";
    case RecordError::Oversize:
      return "oversize";
    case RecordError::BadVersion:
      return "bad version";
    case RecordError::WrongRun:
      return "wrong run";
    case RecordError::WrongKey:
      return "wrong key";
    case RecordError::BadSignature:
      return "bad signature";
    case RecordError::NotCanonical:
      return "not canonical";
    case RecordError::LittleWork:
      return "too little identity work";
  }
  return "unknown";
}

std::string recordPayload(const PeerRecord& record) { return encode(recordEntry(record, kRecordVersion)); }

Expected<std::string> signRecord(const PeerRecord& record, const Identity& identity) {
  if (record.pk != identity.publicKey()) return makeError("record pk is not the signing identity's key");
  if (const std::string invalid = invalidValue(record); !invalid.empty())
    return makeError("invalid record: " + invalid);
  std::string bytes = signedBytes(record, kRecordVersion, identity.sign(recordPayload(record)));
  if (bytes.size() > kMaxRecordBytes) {
    return makeError("signed record is " + std::to_string(bytes.size()) + " bytes, more than " +
                     std::to_string(kMaxRecordBytes) + "; drop old contrib/snapshot entries");
  }
  return bytes;
}

namespace {

// Every field of a decoded record; the first problem lands in `in.error` (the fields after it
// are still read, harmlessly).
PeerRecord readFields(Reader& in, const lt::bdecode_node& root, std::int64_t& version, Signature& sig) {
  in.onlyKeys(root,
              {"v", "run", "pk", "seq", "round", "claims", "lease", "contrib", "snapshot", "merged", "sets", "outputs",
               "stats", "mem", "work", "sig"},
              "");
  PeerRecord r;
  version = in.integer(root, "v");
  r.run = in.string(root, "run");
  r.pk = in.fixedBytes<32>(root, "pk");
  r.seq = in.integer(root, "seq");
  r.round = in.integer(root, "round");
  r.claims = in.claims(root);
  r.leaseUntil = in.integer(root, "lease");
  r.contrib = in.hashMap(root, "contrib");
  r.snapshot = in.hashMap(root, "snapshot");
  r.merged = in.roundMap(root, "merged");
  r.sets = in.roundMap(root, "sets");
  r.outputs = in.hashMap(root, "outputs");
  const auto stats = in.field(root, "stats", lt::bdecode_node::dict_t, "a dictionary");
  if (stats) {
    in.onlyKeys(stats, {"steps", "tokens", "loss_e4", "tps"}, " in \"stats\"");
    r.stats = {in.integer(stats, "steps"), in.integer(stats, "tokens"), in.integer(stats, "loss_e4"),
               in.integer(stats, "tps")};
  }
  r.freeMemory = in.integer(root, "mem");
  r.work = in.integer(root, "work");
  sig = in.fixedBytes<64>(root, "sig");
  return r;
}

}  // namespace

ParsedRecord parseRecord(std::string_view bytes, std::string_view expectedRun, const PublicKey* expectedKey,
                         int minWorkBits) {
  if (bytes.size() > kMaxRecordBytes) {
    return reject(RecordError::Oversize,
                  std::to_string(bytes.size()) + " bytes, limit " + std::to_string(kMaxRecordBytes));
  }
  lt::error_code ec;
  int errorPos = 0;
  // A record nests two levels (dict → stats/claims); 1000 bytes hold at most ~500 tokens.
  const lt::bdecode_node root = lt::bdecode({bytes.data(), static_cast<std::ptrdiff_t>(bytes.size())}, ec, &errorPos, 4,
                                            static_cast<int>(kMaxRecordBytes));
  if (ec)
    return reject(RecordError::Garbage, "not bencode (" + ec.message() + " at byte " + std::to_string(errorPos) + ")");
  if (root.type() != lt::bdecode_node::dict_t) return reject(RecordError::Garbage, "not a dictionary");
  if (static_cast<std::size_t>(root.data_section().size()) != bytes.size())
    return reject(RecordError::Garbage, "trailing bytes after the dictionary");

  Reader in;
  std::int64_t version = 0;
  Signature sig{};
  PeerRecord r = readFields(in, root, version, sig);
  if (in.error.empty()) in.error = invalidValue(r);
  if (!in.error.empty()) return reject(RecordError::Garbage, in.error);

  // Re-encoding what was read must give the input back: anything else (unsorted or duplicate keys,
  // leading zeros, "-0") means two byte strings could carry one signed record.
  if (signedBytes(r, version, sig) != bytes) return reject(RecordError::NotCanonical, "not the canonical encoding");
  if (version != kRecordVersion) return reject(RecordError::BadVersion, "\"v\" is " + std::to_string(version));
  if (r.run != expectedRun) return reject(RecordError::WrongRun, "\"run\" is \"" + printable(r.run) + "\"");
  if (expectedKey && *expectedKey != r.pk) {
    return reject(RecordError::WrongKey, "\"pk\" " + toHex(r.pk) + " is not the expected " + toHex(*expectedKey));
  }
  // One hash before the signature check (~50 µs): a key without the run's work is refused cheaply.
  if (const int bits = identityWorkBits(r.pk, r.work); bits < minWorkBits)
    return reject(RecordError::LittleWork, "\"work\" gives " + std::to_string(bits) +
                                               " bits of identity work, the run asks " + std::to_string(minWorkBits));
  if (!verifySignature(r.pk, recordPayload(r), sig))
    return reject(RecordError::BadSignature, "\"sig\" does not verify");

  ParsedRecord parsed;
  parsed.ok = true;
  parsed.record = std::move(r);
  return parsed;
}

}  // namespace es::p2p
