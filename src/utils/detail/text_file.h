// Text and JSON files written crash-safely (internal) (write_file_atomically's guarantees): config.json,
// tokenizer.json, adapter_config.json, index files, traces.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace composer::detail {

/// `text` as the whole content of `path`, atomically.
void write_text_atomically(const std::string& path, const std::string& text);
/// `j` as Python's json.dump(indent=2) lays it out (and Hugging Face writes its files), with a final newline.
void write_json_atomically(const std::string& path, const nlohmann::json& j);

}  // namespace composer::detail
