#include "utils/detail/text_file.h"

#include "composer/utils/atomic_file.h"

namespace composer::detail {

void write_text_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](const ByteSink& sink) { sink(text.data(), text.size()); });
}

void write_json_atomically(const std::string& path, const nlohmann::json& j) {
  write_text_atomically(path, j.dump(2) + "\n");
}

}  // namespace composer::detail
