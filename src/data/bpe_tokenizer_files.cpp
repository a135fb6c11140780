// BpeTokenizer from its two file forms: Hugging Face's tokenizer.json (and tokenizer_config.json beside it for the
// BOS/EOS tokens) and a GGUF file's tokenizer.ggml.* metadata.
#include "composer/data/bpe_tokenizer.h"

#include "composer/formats/gguf.h"
#include "data/detail/pre_tokenizer.h"
#include "data/detail/pretrained_tokenizer.h"
#include "utils/detail/text_file.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace composer {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw std::runtime_error("tokenizer '" + path + "': " + message);
}

std::pair<std::string, std::string> split_merge(const std::string& m, const std::string& path) {
  const size_t space = m.find(' ', 1);
  if (space == std::string::npos) fail(path, "merge '" + m + "' is not two tokens separated by a space");
  return {m.substr(0, space), m.substr(space + 1)};
}

// The pre-tokenizer a tokenizer.json describes, among those BpeTokenizer runs.
PreTokenizer json_pre_tokenizer(const json& pre, const std::string& path) {
  const auto byte_level_with_regex = [](const json& p) {
    return p.value("type", "") == "ByteLevel" && p.value("use_regex", true) && !p.value("add_prefix_space", false);
  };
  if (byte_level_with_regex(pre)) return PreTokenizer::Gpt2;
  if (pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].size() == 2) {
    const json& a = pre["pretokenizers"][0];
    const json& b = pre["pretokenizers"][1];
    if (a.value("type", "") == "Digits" && a.value("individual_digits", false) && byte_level_with_regex(b))
      return PreTokenizer::Gpt2SplitDigits;
    if (a.value("type", "") == "Split" && b.value("type", "") == "ByteLevel" && !b.value("use_regex", true)) {
      const std::string regex = a.contains("pattern") ? a["pattern"].value("Regex", "") : "";
      if (regex.find(R"(\p{N}{1,3})") != std::string::npos) return PreTokenizer::Llama3;
      if (regex.find(R"(|\p{N}|)") != std::string::npos) return PreTokenizer::Qwen2;
      fail(path, "the Split pattern '" + regex + "' is not GPT-2's, SmolLM's, Llama 3's or Qwen2's");
    }
  }
  fail(path, "pre_tokenizer " + pre.dump().substr(0, 200) +
                 " is not one this library runs (byte-level: GPT-2, SmolLM's digits + GPT-2, Llama 3, Qwen2)");
}

// A token given in tokenizer_config.json as a string or as {"content": ...}.
std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  if (config[key].is_string()) return config[key].get<std::string>();
  if (config[key].is_object() && config[key].contains("content")) return config[key]["content"].get<std::string>();
  return std::nullopt;
}

// BOS and EOS from tokenizer_config.json beside tokenizer.json (where Hugging Face keeps them), and a BOS that the
// post-processor's template puts first.
void special_roles(BpeTokenizerOptions& o, const json& tokenizer, const std::string& path,
                   const std::unordered_map<std::string, int64_t>& ids) {
  const auto id_of = [&](const std::optional<std::string>& t) -> std::optional<int64_t> {
    if (!t) return std::nullopt;
    const auto it = ids.find(*t);
    if (it == ids.end()) fail(path, "special token '" + *t + "' of tokenizer_config.json is not in the vocabulary");
    return it->second;
  };
  const auto config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    std::ifstream in(config_path);
    json config;
    try {
      config = json::parse(in);
    } catch (const json::exception& e) {
      fail(config_path.string(), std::string("is not valid JSON: ") + e.what());
    }
    o.bos_id = id_of(config_token(config, "bos_token"));
    o.eos_id = id_of(config_token(config, "eos_token"));
  }
  const json& post = tokenizer.contains("post_processor") ? tokenizer["post_processor"] : json();
  const json* template_processing = nullptr;
  if (post.is_object() && post.value("type", "") == "TemplateProcessing") template_processing = &post;
  if (post.is_object() && post.value("type", "") == "Sequence") {
    for (const auto& p : post["processors"])
      if (p.value("type", "") == "TemplateProcessing") template_processing = &p;
  }
  if (template_processing && (*template_processing)["single"].size() > 1) {
    const json& first = (*template_processing)["single"][0];
    if (first.contains("SpecialToken")) {
      o.bos_id = id_of(first["SpecialToken"]["id"].get<std::string>());
      o.add_bos = true;
    }
  }
}

}  // namespace

std::shared_ptr<BpeTokenizer> BpeTokenizer::from_tokenizer_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, "cannot be opened (missing?)");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    fail(path, std::string("is not valid JSON: ") + e.what());
  }
  const json& model = j["model"];
  if (!model.is_object() || model.value("type", "") != "BPE")
    fail(path, "model.type is " + (model.is_object() ? model.value("type", "missing") : "missing") + ", expected BPE");
  BpeTokenizerOptions o;
  std::unordered_map<std::string, int64_t> ids;
  const auto add_token = [&](const std::string& token, int64_t id) {
    if (id < 0 || id > 10'000'000) fail(path, "token '" + token + "' has id " + std::to_string(id));
    if (o.tokens.size() <= static_cast<size_t>(id)) o.tokens.resize(static_cast<size_t>(id) + 1);
    o.tokens[static_cast<size_t>(id)] = token;
    ids[token] = id;
  };
  for (const auto& [token, id] : model["vocab"].items()) add_token(token, id.get<int64_t>());
  for (const auto& m : model["merges"]) {
    o.merges.push_back(m.is_string() ? split_merge(m.get<std::string>(), path)
                                     : std::make_pair(m[0].get<std::string>(), m[1].get<std::string>()));
  }
  for (const auto& t : j.value("added_tokens", json::array())) {
    add_token(t["content"].get<std::string>(), t["id"].get<int64_t>());
    o.special_ids.push_back(t["id"].get<int64_t>());  // every added token is matched verbatim, special or not
  }
  o.ignore_merges = model.value("ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const auto it = ids.find(model["unk_token"].get<std::string>());
    if (it == ids.end()) fail(path, "model.unk_token '" + model["unk_token"].get<std::string>() + "' is not a token");
    o.unk_id = it->second;
  }
  o.pre_tokenizer = json_pre_tokenizer(j["pre_tokenizer"], path);
  special_roles(o, j, path, ids);
  try {
    return std::make_shared<BpeTokenizer>(std::move(o));
  } catch (const std::invalid_argument& e) {
    fail(path, e.what());
  }
}

std::shared_ptr<BpeTokenizer> BpeTokenizer::from_gguf(const std::string& path) {
  const formats::GgufFile f(path);
  if (!f.has("tokenizer.ggml.model")) fail(path, "has no tokenizer (tokenizer.ggml.model is missing)");
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2") fail(path, "tokenizer.ggml.model is '" + model + "', expected gpt2 (byte-level BPE)");
  const std::string pre = f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : "";
  BpeTokenizerOptions o;
  if (pre == "gpt-2" || pre == "gpt2") {
    o.pre_tokenizer = PreTokenizer::Gpt2;
  } else if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell") {
    o.pre_tokenizer = PreTokenizer::Gpt2SplitDigits;
  } else if (pre == "llama-bpe" || pre == "llama3") {
    o.pre_tokenizer = PreTokenizer::Llama3;
    o.ignore_merges = true;
  } else if (pre == "qwen2") {
    o.pre_tokenizer = PreTokenizer::Qwen2;
  } else {
    fail(path, "tokenizer.ggml.pre is '" + pre + "', expected gpt2, smollm, starcoder, llama-bpe or qwen2");
  }
  o.tokens = f.get_strings("tokenizer.ggml.tokens");
  for (const auto& m : f.get_strings("tokenizer.ggml.merges")) o.merges.push_back(split_merge(m, path));
  if (f.has("tokenizer.ggml.token_type")) {
    const auto types = f.get_ints("tokenizer.ggml.token_type");
    for (size_t id = 0; id < types.size(); ++id) {
      if (types[id] == 3 || types[id] == 4) o.special_ids.push_back(static_cast<int64_t>(id));  // control, user-defined
    }
  }
  if (f.has("tokenizer.ggml.bos_token_id")) o.bos_id = f.get_int("tokenizer.ggml.bos_token_id");
  if (f.has("tokenizer.ggml.eos_token_id")) o.eos_id = f.get_int("tokenizer.ggml.eos_token_id");
  o.add_bos = f.has("tokenizer.ggml.add_bos_token") && f.get_bool("tokenizer.ggml.add_bos_token");
  try {
    return std::make_shared<BpeTokenizer>(std::move(o));
  } catch (const std::invalid_argument& e) {
    fail(path, e.what());
  }
}

}  // namespace composer

namespace composer {
namespace {

// The tokenizer.json pre_tokenizer of `kind`.
nlohmann::json pre_tokenizer_json(PreTokenizer kind) {
  const json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  switch (kind) {
    case PreTokenizer::Gpt2:
      return byte_level;
    case PreTokenizer::Gpt2SplitDigits:
      return {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level}}};
    default: {
      json bytes_only = byte_level;
      bytes_only["use_regex"] = false;
      const json split = {{"type", "Split"},
                          {"pattern", {{"Regex", detail::pre_tokenizer_pattern(kind)}}},
                          {"behavior", "Isolated"},
                          {"invert", false}};
      return {{"type", "Sequence"}, {"pretokenizers", {split, bytes_only}}};
    }
  }
}

}  // namespace

void BpeTokenizer::save_pretrained(const std::string& dir) const {
  const auto& o = options_;
  json vocab = json::object();
  for (size_t id = 0; id < o.tokens.size(); ++id) vocab[o.tokens[id]] = id;
  json merges = json::array();
  for (const auto& [a, b] : o.merges) merges.push_back(a + " " + b);
  json added = json::array();
  for (int64_t id : o.special_ids) {
    added.push_back({{"id", id},
                     {"content", o.tokens[static_cast<size_t>(id)]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  json post = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  if (o.add_bos) {
    const std::string bos = o.tokens[static_cast<size_t>(*o.bos_id)];
    post = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {*o.bos_id}}, {"tokens", {bos}}}}}}};
  }
  const json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre_tokenizer_json(o.pre_tokenizer)},
      {"post_processor", post},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", o.unk_id ? json(o.tokens[static_cast<size_t>(*o.unk_id)]) : json()},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", o.ignore_merges},
        {"vocab", vocab},
        {"merges", merges}}}};
  const auto token = [&](const std::optional<int64_t>& id) {
    return id ? json(o.tokens[static_cast<size_t>(*id)]) : json();
  };
  const json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                       {"bos_token", token(o.bos_id)},
                       {"eos_token", token(o.eos_id)},
                       {"unk_token", token(o.unk_id)},
                       {"add_bos_token", o.add_bos},
                       {"clean_up_tokenization_spaces", false}};
  std::filesystem::create_directories(dir);
  composer::detail::write_json_atomically((std::filesystem::path(dir) / "tokenizer.json").string(), tokenizer);
  composer::detail::write_json_atomically((std::filesystem::path(dir) / "tokenizer_config.json").string(), config);
}

std::shared_ptr<BpeTokenizer> BpeTokenizer::from_pretrained(const std::string& path) {
  if (auto tokenizer = detail::pretrained_tokenizer(path)) return tokenizer;
  throw std::runtime_error("tokenizer '" + path + "': " +
                           (std::filesystem::is_directory(path)
                                ? "the directory has no tokenizer.json"
                                : "expected a model directory, a tokenizer.json or a .gguf file"));
}

namespace detail {

std::shared_ptr<BpeTokenizer> pretrained_tokenizer(const std::string& path) {
  const auto ends_with = [&](const std::string& suffix) {
    return path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".gguf")) return BpeTokenizer::from_gguf(path);
  if (ends_with(".json")) return BpeTokenizer::from_tokenizer_json(path);
  const std::string json = (std::filesystem::path(path) / "tokenizer.json").string();
  if (!std::filesystem::is_directory(path) || !std::filesystem::exists(json)) return nullptr;
  return BpeTokenizer::from_tokenizer_json(json);
}

}  // namespace detail

}  // namespace composer
