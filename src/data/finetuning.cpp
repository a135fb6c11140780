#include "composer/data/finetuning.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

namespace composer {

std::vector<std::string> read_jsonl_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("JSON-lines file '" + path + "' cannot be opened (missing?)");
  std::vector<std::string> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw std::runtime_error("JSON-lines file '" + path + "' line " + std::to_string(n) + " is not JSON");
    }
    if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
      throw std::runtime_error("JSON-lines file '" + path + "' line " + std::to_string(n) + " has no string '" + key +
                               "'");
    }
    out.push_back(j[key].get<std::string>());
  }
  if (out.empty()) throw std::runtime_error("JSON-lines file '" + path + "' has no records");
  return out;
}

std::shared_ptr<TensorDataset> make_prompt_response_dataset(const std::vector<PromptResponse>& pairs, int64_t seq_len,
                                                            int64_t eos_id, int64_t pad_id) {
  if (seq_len <= 0) throw std::invalid_argument("make_prompt_response_dataset: seq_len must be > 0");
  if (pairs.empty()) throw std::invalid_argument("make_prompt_response_dataset: no prompt/response pairs");
  const auto n = static_cast<int64_t>(pairs.size());
  at::Tensor inputs = at::full({n, seq_len}, pad_id, at::kLong);
  at::Tensor labels = at::full({n, seq_len}, -100, at::kLong);
  auto in = inputs.accessor<int64_t, 2>();
  auto lab = labels.accessor<int64_t, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const auto& p = pairs[static_cast<size_t>(i)];
    if (p.response.empty())
      throw std::invalid_argument("make_prompt_response_dataset: pair " + std::to_string(i) + " has an empty response");
    std::vector<int64_t> seq(p.prompt);
    seq.insert(seq.end(), p.response.begin(), p.response.end());
    seq.push_back(eos_id);
    const auto prompt_len = static_cast<int64_t>(p.prompt.size());
    const int64_t len = std::min<int64_t>(static_cast<int64_t>(seq.size()) - 1, seq_len);
    for (int64_t t = 0; t < len; ++t) {
      in[i][t] = seq[static_cast<size_t>(t)];
      // Position t predicts seq[t + 1]: a target only when that token belongs to the response (or is the eos).
      if (t + 1 >= prompt_len) lab[i][t] = seq[static_cast<size_t>(t + 1)];
    }
  }
  return std::make_shared<TensorDataset>(Batch({{"input_ids", inputs}, {"labels", labels}}));
}

}  // namespace composer
