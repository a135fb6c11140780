// The standard AWS settings: environment variables first, then the shared files (~/.aws/credentials, ~/.aws/config).
#pragma once

#include <string>

namespace composer::detail {

struct AwsSettings {
  std::string access_key, secret_key, session_token;
  std::string region;
  std::string endpoint_url;
  std::string profile;
  /// Where the credentials came from, for messages: "environment", "~/.aws/credentials [default]", "none".
  std::string credentials_source;
};

/// Resolves every setting: an explicit value wins, then the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
/// AWS_SESSION_TOKEN, AWS_REGION, AWS_DEFAULT_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
/// S3_ENDPOINT_URL), then the profile's entries in $AWS_SHARED_CREDENTIALS_FILE / $AWS_CONFIG_FILE (default
/// ~/.aws/credentials and ~/.aws/config), then region us-east-1.
AwsSettings resolve_aws_settings(const std::string& endpoint_url, const std::string& region,
                                 const std::string& profile);

}  // namespace composer::detail
