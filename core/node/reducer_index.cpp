#include "core/node/reducer_index.h"

#include "core/common/atomic_file.h"
#include "core/common/json_depth.h"
#include "core/common/safe_quote.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <filesystem>
#include <map>

namespace es::node {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

bool isLowerHex(const QString& s, std::initializer_list<int> sizes) {
  const bool sized = std::find(sizes.begin(), sizes.end(), int(s.size())) != sizes.end();
  return sized && std::all_of(s.begin(), s.end(), [](QChar c) { return c.isDigit() || (c >= 'a' && c <= 'f'); });
}

// Shard id → its place in the plan.
std::map<std::string, std::size_t> planOrder(const std::vector<std::string>& planShards) {
  std::map<std::string, std::size_t> order;
  for (std::size_t i = 0; i < planShards.size(); ++i) order.emplace(planShards[i], i);
  return order;
}

// "" when the outputs are plan shards, each once, in plan order.
std::string orderProblem(const std::vector<ReducedOutput>& outputs, const std::vector<std::string>& planShards) {
  const auto order = planOrder(planShards);
  std::size_t next = 0;  // the first plan place the next output may take
  for (const auto& out : outputs) {
    const auto at = order.find(out.shard);
    if (at == order.end()) return "shard " + safeQuote(out.shard) + " is not in the round's plan";
    if (at->second < next) return "shard " + safeQuote(out.shard) + " is out of plan order or repeated";
    next = at->second + 1;
  }
  return {};
}

QJsonObject indexObject(const ReducerIndex& index) {
  QJsonArray outputs;
  for (const auto& out : index.outputs) outputs.append(QJsonArray{q(out.shard), q(out.inputs), q(out.output.str())});
  return {{"format", q(kReducerIndexFormat)},      {"run", q(index.key.run)},
          {"round", double(index.key.round)},      {"base", q(index.key.baseHash)},
          {"reducer", q(index.key.reducer.str())}, {"outputs", outputs}};
}

// One output entry: [shard, inputs, content id], each a string of its form.
Expected<ReducedOutput> outputOf(const QJsonValue& value) {
  const QJsonArray entry = value.toArray();
  if (!value.isArray() || entry.size() != 3 || !entry[0].isString() || !entry[1].isString() || !entry[2].isString())
    return makeError("an output is not [shard, inputs, content id]");
  const QString inputs = entry[1].toString(), output = entry[2].toString();
  if (!isLowerHex(inputs, {16})) return makeError("an output's input digest is not 16 lower-case hex digits");
  if (!isLowerHex(output, {40, 64})) return makeError("an output's content id is not an info-hash");
  return ReducedOutput{entry[0].toString().toStdString(), inputs.toStdString(), ContentId(output.toStdString())};
}

Expected<ReducerIndex> indexOf(const QJsonObject& root) {
  const QStringList keys{"base", "format", "outputs", "reducer", "round", "run"};
  if (root.keys() != keys) return makeError("its fields are not exactly " + keys.join(", ").toStdString());
  if (root["format"].toString().toStdString() != kReducerIndexFormat) return makeError("not a reducer index");
  const double round = root["round"].toDouble(-1);
  if (!root["round"].isDouble() || round < 0 || round > 9e15 || round != double(std::int64_t(round)))
    return makeError("its round is not a round number");
  if (!root["outputs"].isArray()) return makeError("its outputs are not a list");
  ReducerIndex index;
  index.key = {root["run"].toString().toStdString(), std::int64_t(round), root["base"].toString().toStdString(),
               PeerId(root["reducer"].toString().toStdString())};
  for (const auto& value : root["outputs"].toArray()) {
    auto out = outputOf(value);
    if (!out) return out.failure();
    index.outputs.push_back(std::move(*out));
  }
  return index;
}

bool sameKey(const ReducerIndexKey& a, const ReducerIndexKey& b) {
  return a.run == b.run && a.round == b.round && a.baseHash == b.baseHash && a.reducer == b.reducer;
}

}  // namespace

std::string reducerIndexFileName(std::int64_t round) { return "outputs-" + std::to_string(round) + ".json"; }

// The fixed fields (format, a 64-digit run id, a round, a 64-digit base hash, a 40-digit peer id)
// fit in 512 bytes; an output is its shard id (the plan's are a few characters; 64 allowed), a
// 16-digit digest and a 64-digit content id, with quotes and commas: at most 160.
std::int64_t reducerIndexMaxBytes(std::size_t shards) { return 512 + 160 * std::int64_t(shards); }

Expected<QByteArray> reducerIndexBytes(const ReducerIndex& index, const std::vector<std::string>& planShards) {
  if (const auto problem = orderProblem(index.outputs, planShards); !problem.empty()) return makeError(problem);
  return QJsonDocument(indexObject(index)).toJson(QJsonDocument::Compact);
}

Status saveReducerIndex(const std::string& path, const ReducerIndex& index,
                        const std::vector<std::string>& planShards) {
  auto bytes = reducerIndexBytes(index, planShards);
  if (!bytes) return bytes.failure();
  return writeFileAtomically(path, std::string_view(bytes->constData(), std::size_t(bytes->size())));
}

Expected<ReducerIndex> loadReducerIndex(const std::string& path, const ReducerIndexKey& key,
                                        const std::vector<std::string>& planShards) {
  const std::string where = "reducer index " + safeQuote(path) + ": ";
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return makeError(where + ec.message());
  if (std::int64_t(size) > reducerIndexMaxBytes(planShards.size()))
    return makeError(where + std::to_string(size) + " bytes, more than the round's plan allows");
  auto bytes = readWholeFile(path);
  if (!bytes) return makeError(where + bytes.error());
  if (jsonNestingDepth(*bytes) > 3) return makeError(where + "nested deeper than the format");
  const QByteArray raw = QByteArray::fromStdString(*bytes);
  QJsonParseError error{};
  const QJsonDocument doc = QJsonDocument::fromJson(raw, &error);
  if (error.error != QJsonParseError::NoError || !doc.isObject()) return makeError(where + "not a JSON object");
  auto index = indexOf(doc.object());
  if (!index) return makeError(where + index.error());
  if (!sameKey(index->key, key)) return makeError(where + "not the index of this round, state and reducer");
  if (const auto problem = orderProblem(index->outputs, planShards); !problem.empty())
    return makeError(where + problem);
  if (QJsonDocument(indexObject(*index)).toJson(QJsonDocument::Compact) != raw)
    return makeError(where + "not written in the one spelling the format has");
  return index;
}

std::vector<std::pair<std::string, ShardOutput>> shardOutputsOf(const ReducerIndex& index) {
  std::vector<std::pair<std::string, ShardOutput>> out;
  for (const auto& o : index.outputs)
    out.push_back({o.shard, ShardOutput{index.key.reducer.str(), o.inputs, o.output.str()}});
  return out;
}

}  // namespace es::node
