#include "storage/detail/aws_config.h"

#include <cstdlib>
#include <fstream>
#include <map>

namespace composer::detail {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

/// The entries of one [section] of an INI file; empty when the file or the section is missing.
std::map<std::string, std::string> ini_section(const std::string& path, const std::string& section) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      inside = trim(line.substr(1, line.size() - 2)) == section;
      continue;
    }
    const auto eq = line.find('=');
    if (inside && eq != std::string::npos) out[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return out;
}

std::string first(std::initializer_list<std::string> values) {
  for (const auto& v : values)
    if (!v.empty()) return v;
  return "";
}

}  // namespace

AwsSettings resolve_aws_settings(const std::string& endpoint_url, const std::string& region,
                                 const std::string& profile) {
  AwsSettings s;
  s.profile = first({profile, env("AWS_PROFILE"), "default"});
  const std::string home = env("HOME");
  const std::string credentials_file = first({env("AWS_SHARED_CREDENTIALS_FILE"), home + "/.aws/credentials"});
  const std::string config_file = first({env("AWS_CONFIG_FILE"), home + "/.aws/config"});
  const auto config = ini_section(config_file, s.profile == "default" ? "default" : "profile " + s.profile);
  auto value = [&](const std::map<std::string, std::string>& m, const std::string& k) {
    const auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  if (!env("AWS_ACCESS_KEY_ID").empty()) {
    s.access_key = env("AWS_ACCESS_KEY_ID");
    s.secret_key = env("AWS_SECRET_ACCESS_KEY");
    s.session_token = env("AWS_SESSION_TOKEN");
    s.credentials_source = "the environment (AWS_ACCESS_KEY_ID)";
  } else {
    const auto creds = ini_section(credentials_file, s.profile);
    s.access_key = value(creds, "aws_access_key_id");
    s.secret_key = value(creds, "aws_secret_access_key");
    s.session_token = value(creds, "aws_session_token");
    s.credentials_source =
        s.access_key.empty() ? "none (unsigned requests)" : credentials_file + " [" + s.profile + "]";
  }
  s.region = first({region, env("AWS_REGION"), env("AWS_DEFAULT_REGION"), value(config, "region"), "us-east-1"});
  s.endpoint_url = first({endpoint_url, env("AWS_ENDPOINT_URL_S3"), env("AWS_ENDPOINT_URL"), env("S3_ENDPOINT_URL"),
                          value(config, "endpoint_url")});
  while (!s.endpoint_url.empty() && s.endpoint_url.back() == '/') s.endpoint_url.pop_back();
  return s;
}

}  // namespace composer::detail
