#include "core/export/hf_export.h"

#include "core/common/atomic_file.h"
#include "core/common/safe_quote.h"
#include "core/export/hf_model.h"
#include "core/export/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

namespace es::hf {
namespace fs = std::filesystem;
namespace {

constexpr const char* kProvenanceFile = "expertswarm.json";

std::string provenanceJson(const ModelCard& card) {
  nlohmann::ordered_json j;
  j["format"] = "expertswarm-hf-export";
  j["version"] = 1;
  j["run_id"] = card.runId;
  j["round"] = card.round;
  j["tokens_seen"] = card.tokensSeen;
  j["peers_contributed"] = card.peersContributed;
  if (card.validationLoss) j["validation_loss"] = *card.validationLoss;
  return j.dump(2) + "\n";
}

Status writeFolder(const ExportInput& in, const std::string& dir) {
  auto tensors = mixtralTensors(*in.weights, in.config);
  if (!tensors) return makeError(tensors.error());
  // transformers refuses a safetensors file whose metadata does not name its framework.
  if (auto s = ckpt::saveSafetensors(dir + "/model.safetensors", *tensors, {{"format", "pt"}}); !s) return s;
  auto tokenizer = tokenizerJson(*in.tokenizer);
  if (!tokenizer) return makeError("tokenizer: " + tokenizer.error());
  const std::pair<const char*, std::string> files[] = {
      {"config.json", mixtralConfigJson(in.config)},
      {"generation_config.json", generationConfigJson()},
      {"tokenizer.json", *tokenizer},
      {"tokenizer_config.json", tokenizerConfigJson(in.config.seqLen)},
      {"README.md", modelCardMarkdown(in.card, in.config)},
      {kProvenanceFile, provenanceJson(in.card)},
  };
  for (const auto& [name, text] : files)
    if (auto s = writeFileAtomically(dir + "/" + name, text); !s) return s;
  return syncDirectory(dir);
}

// Puts the finished `staged` folder at `out`, keeping an earlier export there until it is.
Status replaceFolder(const fs::path& staged, const fs::path& out) {
  std::error_code ec;
  const fs::path old = out.string() + ".old-" + std::to_string(::getpid());
  const bool hadOne = fs::exists(out, ec);
  if (hadOne) {
    fs::rename(out, old, ec);
    if (ec) return makeError("cannot move the earlier export aside: " + ec.message());
  }
  fs::rename(staged, out, ec);
  if (ec) {
    std::error_code back;
    if (hadOne) fs::rename(old, out, back);
    return makeError("cannot rename the new export into place: " + ec.message());
  }
  if (hadOne) fs::remove_all(old, ec);
  return syncDirectory(out.parent_path().empty() ? "." : out.parent_path().string());
}

}  // namespace

std::string modelCardMarkdown(const ModelCard& card, const model::ModelConfig& c) {
  std::ostringstream md;
  md << "---\nlibrary_name: transformers\npipeline_tag: text-generation\ntags: [mixtral, moe, expertswarm]\n---\n\n";
  md << "# " << safeQuote(card.runName, 120) << ", round " << card.round << "\n\n";
  md << "A Mixture-of-Experts language model pretrained by volunteers with ExpertSwarm: each peer "
        "trained the experts it claimed plus the shared weights, and the peers merged them every round "
        "(SPES, arXiv 2602.11543). This is the merged state of round "
     << card.round << ".\n\n";
  md << "| | |\n|---|---|\n";
  md << "| run id | `" << card.runId << "` |\n";
  md << "| rounds merged | " << card.round << " |\n";
  md << "| tokens seen (all peers) | " << (card.tokensSeen > 0 ? std::to_string(card.tokensSeen) : "unknown") << " |\n";
  md << "| peers that contributed | " << card.peersContributed << " |\n";
  char loss[32] = "not measured";
  if (card.validationLoss) std::snprintf(loss, sizeof loss, "%.4f", *card.validationLoss);
  md << "| validation loss | " << loss << " |\n";
  md << "| architecture | Mixtral: " << c.nLayers << " layers, d=" << c.dModel << ", " << c.nHeads << " heads, "
     << c.nExperts << " experts (top-" << c.topK << "), context " << c.seqLen << ", vocabulary " << c.vocabSize
     << " (byte-level BPE) |\n\n";
  md << "## Use\n\n```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(\"PATH\"); model = AutoModelForCausalLM.from_pretrained(\"PATH\")\n"
        "print(tok.decode(model.generate(**tok(\"The \", return_tensors=\"pt\"), max_new_tokens=40)[0]))\n```\n";
  return md.str();
}

Status exportHuggingFace(const ExportInput& in, const std::string& outDir) {
  if (!in.weights || !in.tokenizer) return makeError("export: no weights or no tokenizer");
  if (in.tokenizer->vocabSize() != in.config.vocabSize)
    return makeError("export: the tokenizer has " + std::to_string(in.tokenizer->vocabSize()) +
                     " tokens but the model " + std::to_string(in.config.vocabSize));
  const fs::path out = fs::absolute(fs::path(outDir)).lexically_normal();
  std::error_code ec;
  if (fs::exists(out, ec) &&
      !(fs::is_directory(out, ec) && (fs::is_empty(out, ec) || fs::exists(out / kProvenanceFile, ec))))
    return makeError(out.string() + " exists and is not an earlier export; nothing was written");
  fs::create_directories(out.parent_path(), ec);
  if (ec) return makeError("cannot create " + out.parent_path().string() + ": " + ec.message());
  const fs::path staged = out.string() + ".partial-" + std::to_string(::getpid());
  fs::remove_all(staged, ec);
  fs::create_directory(staged, ec);
  if (ec) return makeError("cannot create " + staged.string() + ": " + ec.message());
  Status written = writeFolder(in, staged.string());
  if (written) written = replaceFolder(staged, out);
  if (!written) fs::remove_all(staged, ec);
  return written;
}

}  // namespace es::hf
