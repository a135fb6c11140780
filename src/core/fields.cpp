#include "composer/core/fields.h"

#include "utils/detail/text.h"

#include <algorithm>
#include <stdexcept>

namespace composer {

std::string field_text(double value) { return detail::python_float_str(value); }
std::string field_text(int64_t value) { return std::to_string(value); }
std::string field_text(bool value) { return value ? "True" : "False"; }
std::string field_text(const std::string& value) { return "'" + value + "'"; }
std::string field_text(const Time& value) { return field_text(value.to_string()); }
std::string field_text(const BatchKey& value) {
  return std::holds_alternative<int64_t>(value) ? field_text(std::get<int64_t>(value))
                                                : field_text(std::get<std::string>(value));
}

std::string fields_table(const std::vector<FieldDoc>& fields) {
  std::string out = "| name | default | meaning |\n|---|---|---|\n";
  for (const auto& f : fields) out += "| `" + f.name + "` | `" + f.value + "` | " + f.doc + " |\n";
  return out;
}

void read_field(Hparams& h, const std::string& key, double& value) { value = h.get_double(key, value); }
void read_field(Hparams& h, const std::string& key, int64_t& value) { value = h.get_int(key, value); }
void read_field(Hparams& h, const std::string& key, bool& value) { value = h.get_bool(key, value); }
void read_field(Hparams& h, const std::string& key, std::string& value) { value = h.get_string(key, value); }

void read_field(Hparams& h, const std::string& key, Time& value) {
  const std::string text = h.get_string(key, value.to_string());
  try {
    value = Time::from_string(text);
  } catch (const std::invalid_argument&) {
    h.fail(key, "a time such as '2ep' or '100ba'");
  }
}

void read_field(Hparams& h, const std::string& key, BatchKey& value) {
  const std::string text = h.get_string(
      key, std::get_if<std::string>(&value) ? std::get<std::string>(value) : std::to_string(std::get<int64_t>(value)));
  const bool numeric =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!numeric) {
    value = BatchKey{text};
    return;
  }
  try {
    value = BatchKey{static_cast<int64_t>(std::stoll(text))};
  } catch (const std::out_of_range&) {
    h.fail(key, "a batch position or field name");
  }
}

}  // namespace composer
