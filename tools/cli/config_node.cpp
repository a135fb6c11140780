#include "cli/config_node.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <type_traits>

namespace composer::cli {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string describe(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

template <class T>
T convert(const YAML::Node& n, const std::string& path, const char* expected) {
  if (!n.IsScalar()) throw ConfigError(path + ": expected " + expected + ", got " + describe(n));
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    static const std::regex integer(R"(^\s*[+-]?\d+\s*$)");
    const bool too_big = std::is_integral_v<T> && !std::is_same_v<T, bool> && std::regex_match(n.Scalar(), integer);
    throw ConfigError(path + ": expected " + expected + (too_big ? " within the int64 range" : "") + ", got " +
                      describe(n));
  }
}

// A list index in an override path: digits only, and small enough to be a position in a list.
size_t list_index(const std::string& part, size_t size, const std::string& assignment) {
  if (part.size() > 9 || std::stoul(part) >= size) {
    throw ConfigError("override '" + assignment + "': index " + part + " is past the end of the list (" +
                      std::to_string(size) + " entries)");
  }
  return std::stoul(part);
}

}  // namespace

ConfigNode::ConfigNode(YAML::Node node, std::string path) : node_(std::move(node)), path_(std::move(path)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    throw ConfigError((path_.empty() ? std::string("config") : path_) + ": expected a mapping of keys, got " +
                      describe(node_));
  }
}

std::string ConfigNode::key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

void ConfigNode::expect_keys(const std::vector<std::string>& allowed) const {
  if (!node_ || !node_.IsMap()) return;
  for (const auto& kv : node_) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      throw ConfigError(key_path(key) + ": unknown key; allowed keys here: " + join(allowed));
    }
  }
}

bool ConfigNode::has(const std::string& key) const {
  return node_ && node_.IsMap() && node_[key] && !node_[key].IsNull();
}

YAML::Node ConfigNode::scalar(const std::string& key) const { return node_[key]; }

int64_t ConfigNode::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? convert<int64_t>(scalar(key), key_path(key), "an integer") : fallback;
}

bool ConfigNode::get_bool(const std::string& key, bool fallback) const {
  return has(key) ? convert<bool>(scalar(key), key_path(key), "true or false") : fallback;
}

std::string ConfigNode::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? convert<std::string>(scalar(key), key_path(key), "a string") : fallback;
}

std::string ConfigNode::require_string(const std::string& key) const {
  if (!has(key)) throw ConfigError(key_path(key) + ": required (a string)");
  return get_string(key, "");
}

ConfigNode ConfigNode::child(const std::string& key) const {
  return ConfigNode(has(key) ? node_[key] : YAML::Node(YAML::NodeType::Map), key_path(key));
}

std::vector<ConfigNode> ConfigNode::children(const std::string& key) const {
  std::vector<ConfigNode> out;
  if (!has(key)) return out;
  const YAML::Node n = node_[key];
  if (!n.IsSequence()) throw ConfigError(key_path(key) + ": expected a list, got " + describe(n));
  for (size_t i = 0; i < n.size(); ++i) out.emplace_back(n[i], key_path(key) + "." + std::to_string(i));
  return out;
}

int64_t ConfigNode::positive(int64_t v, const std::string& path, bool allow_zero) {
  if (v < 0 || (v == 0 && !allow_zero)) {
    throw ConfigError(path + ": expected " + (allow_zero ? "a non-negative" : "a positive") + " integer, got " +
                      std::to_string(v));
  }
  return v;
}

namespace {

// Every mapping key in `node` is a plain scalar: YAML's complex keys ("? [a, b]") name no setting.
void check_plain_keys(const YAML::Node& node, const std::string& path, const std::string& where) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        throw ConfigError(where + (path.empty() ? "" : path + ": ") + "a key at line " +
                          std::to_string(kv.first.Mark().line + 1) + " is a " +
                          (kv.first.IsSequence() ? "list" : "mapping") + "; keys must be plain names");
      }
      const std::string key = kv.first.Scalar();
      check_plain_keys(kv.second, path.empty() ? key : path + "." + key, where);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) check_plain_keys(node[i], path + "[" + std::to_string(i) + "]", where);
  }
}

/// Whether the quoted scalar opening at `pos` closes before the end of `text` (yaml-cpp accepts a quote left open
/// at the end of a file that ends in a newline, folding every later line into the value).
bool quote_closes(const std::string& text, size_t pos) {
  const char q = text[pos];
  for (size_t i = pos + 1; i < text.size(); ++i) {
    if (q == '"' && text[i] == '\\') {
      ++i;
    } else if (text[i] == q) {
      if (q == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is a quote inside a single-quoted scalar
        continue;
      }
      return true;
    }
  }
  return false;
}

void check_quotes_close(const YAML::Node& node, const std::string& text, const std::string& where) {
  if (node.IsScalar() && node.Tag() == "!") {
    const size_t pos = node.Mark().pos;
    if (pos < text.size() && (text[pos] == '"' || text[pos] == '\'') && !quote_closes(text, pos))
      throw ConfigError(where + "line " + std::to_string(node.Mark().line + 1) + ": the " +
                        (text[pos] == '"' ? "double" : "single") + " quote opened at column " +
                        std::to_string(node.Mark().column + 1) + " is never closed");
  } else if (node.IsMap()) {
    for (const auto& kv : node) {
      check_quotes_close(kv.first, text, where);
      check_quotes_close(kv.second, text, where);
    }
  } else if (node.IsSequence()) {
    for (const auto& e : node) check_quotes_close(e, text, where);
  }
}

}  // namespace

YAML::Node load_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError("config file '" + path + "' is a directory, expected a YAML file");
  std::ifstream in(path);
  if (!in) throw ConfigError("config file '" + path + "' cannot be opened: " + std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError("config file '" + path + "' is not valid YAML: " + e.what());
  }
  check_quotes_close(root, text, "config file '" + path + "': ");
  check_plain_keys(root, "", "config file '" + path + "': ");
  return root;
}

void apply_override(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("override '" + assignment + "': expected key.path=value");
  }
  const std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty()) throw ConfigError("override '" + assignment + "': empty part in key path '" + key + "'");
    parts.push_back(part);
  }
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    throw ConfigError("override '" + assignment + "': value is not valid YAML: " + e.what());
  }
  check_plain_keys(parsed, key, "override '" + assignment + "': ");
  // Walk with fresh handles (YAML::Node assignment would alias), creating mappings as needed.
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node cur = chain.back();
    const bool index = cur.IsSequence() && std::all_of(parts[i].begin(), parts[i].end(), ::isdigit);
    YAML::Node next = index ? cur[list_index(parts[i], cur.size(), assignment)] : cur[parts[i]];
    if (!next || next.IsNull()) next = YAML::Node(YAML::NodeType::Map);
    if (!next.IsMap() && !next.IsSequence()) {
      throw ConfigError("override '" + assignment + "': '" + parts[i] + "' is a value, not a section");
    }
    if (!index) cur[parts[i]] = next;
    chain.push_back(next);
  }
  YAML::Node parent = chain.back();
  const std::string& last = parts.back();
  if (parent.IsSequence() && std::all_of(last.begin(), last.end(), ::isdigit)) {
    parent[list_index(last, parent.size(), assignment)] = parsed;
  } else {
    parent[last] = parsed;
  }
}

}  // namespace composer::cli
