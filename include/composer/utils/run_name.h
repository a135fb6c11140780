#pragma once

#include <string>

namespace composer {

/// `name` if non-empty, else $COMPOSER_RUN_NAME, else $RUN_NAME, else "<unix time>-<adjective>-<noun>".
std::string resolve_run_name(const std::string& name);

}  // namespace composer
