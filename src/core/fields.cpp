#include "composer/core/fields.h"

#include "utils/detail/text.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace composer {

std::string field_text(double value) { return detail::python_float_str(value); }
std::string field_text(int64_t value) { return std::to_string(value); }
std::string field_text(int value) { return std::to_string(value); }
std::string field_text(uint64_t value) { return std::to_string(value); }
std::string field_text(bool value) { return value ? "True" : "False"; }
std::string field_text(const std::string& value) { return "'" + value + "'"; }
std::string field_text(const Time& value) { return field_text(value.to_string()); }
std::string field_text(const BatchKey& value) {
  return std::holds_alternative<int64_t>(value) ? field_text(std::get<int64_t>(value))
                                                : field_text(std::get<std::string>(value));
}

std::string field_text(Event value) { return field_text(std::string(event_value(value))); }

std::vector<std::string> split_top_level(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  char quote = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '[' || c == '(') {
      ++depth;
    } else if ((c == ']' || c == ')') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      items.push_back(item);
      item.clear();
      continue;
    }
    item += c;
  }
  items.push_back(item);
  return items;
}

std::string unquote(const std::string& text) {
  std::string v = detail::trim(text);
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
  return v;
}

std::vector<std::string> split_list(const std::string& text) {
  std::string body = detail::trim(text);
  if (body.size() >= 2 && ((body.front() == '[' && body.back() == ']') || (body.front() == '(' && body.back() == ')')))
    body = body.substr(1, body.size() - 2);
  std::vector<std::string> items;
  if (detail::trim(body).empty()) return items;
  for (const std::string& item : split_top_level(body)) items.push_back(unquote(item));
  return items;
}

std::string field_text(const std::tuple<double, double>& value) {
  return "(" + field_text(std::get<0>(value)) + ", " + field_text(std::get<1>(value)) + ")";
}

void read_field(Hparams& h, const std::string& key, std::tuple<double, double>& value) {
  if (!h.has(key)) return;
  std::vector<double> pair;
  read_field(h, key, pair);
  if (pair.size() != 2) h.fail(key, "two numbers such as [0.9, 0.999]");
  value = {pair[0], pair[1]};
}

namespace {

// torch's attribute names of the dtypes a config names.
const std::vector<std::pair<std::string, at::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<std::string, at::ScalarType>> names{
      {"float32", at::kFloat}, {"float16", at::kHalf},  {"bfloat16", at::kBFloat16}, {"float64", at::kDouble},
      {"int64", at::kLong},    {"int32", at::kInt},     {"int16", at::kShort},       {"int8", at::kChar},
      {"uint8", at::kByte},    {"bool", at::kBool},     {"fp32", at::kFloat},        {"fp16", at::kHalf},
      {"half", at::kHalf},     {"bf16", at::kBFloat16}, {"fp64", at::kDouble},       {"double", at::kDouble},
  };
  return names;
}

}  // namespace

std::string field_text(at::ScalarType value) {
  for (const auto& [name, t] : dtype_names())
    if (t == value) return field_text(name);
  return field_text(std::string(c10::toString(value)));
}

void read_field(Hparams& h, const std::string& key, at::ScalarType& value) {
  if (!h.has(key)) return;
  std::string text = h.get_string(key, "");
  if (text.rfind("torch.", 0) == 0) text = text.substr(6);
  for (const auto& [name, t] : dtype_names()) {
    if (name == text) {
      value = t;
      return;
    }
  }
  h.fail(key, "a dtype such as float32, bfloat16, float16 or int64");
}

std::string fields_table(const std::vector<FieldDoc>& fields) {
  std::string out = "| name | default | meaning |\n|---|---|---|\n";
  for (const auto& f : fields) out += "| `" + f.name + "` | `" + f.value + "` | " + f.doc + " |\n";
  return out;
}

void read_field(Hparams& h, const std::string& key, double& value) { value = h.get_double(key, value); }
void read_field(Hparams& h, const std::string& key, int64_t& value) { value = h.get_int(key, value); }

void read_field(Hparams& h, const std::string& key, int& value) {
  const int64_t v = h.get_int(key, value);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) h.fail(key, "a 32-bit integer");
  value = static_cast<int>(v);
}

void read_field(Hparams& h, const std::string& key, uint64_t& value) {
  if (!h.has(key)) return;
  const int64_t v = h.get_int(key, 0);
  if (v < 0) h.fail(key, "a non-negative integer");
  value = static_cast<uint64_t>(v);
}

Time read_time(Hparams& h, const std::string& key, TimeUnit int_unit) {
  const std::string text = h.get_string(key, "");
  const bool integer =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!integer) {
    try {
      return Time::from_string(text);
    } catch (const std::invalid_argument& e) {
      h.error(key, e.what());
    }
  }
  try {
    return Time(static_cast<int64_t>(std::stoll(text)), int_unit);
  } catch (const std::out_of_range&) {
    h.fail(key, std::string("a count of ") + to_string(int_unit) + " within the int64 range");
  }
}
void read_field(Hparams& h, const std::string& key, bool& value) { value = h.get_bool(key, value); }
void read_field(Hparams& h, const std::string& key, std::string& value) { value = h.get_string(key, value); }

void read_field(Hparams& h, const std::string& key, Event& value) {
  std::string text = h.get_string(key, event_value(value));
  if (text.rfind("Event.", 0) == 0) text = text.substr(6);
  try {
    value = parse_event(text);
  } catch (const std::invalid_argument&) {
    h.fail(key, "an event such as 'init' or 'after_load'");
  }
}

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
