#include "composer/core/format_name.h"

#include "composer/core/state.h"
#include "composer/dist/env.h"

#include <utility>
#include <vector>

namespace composer {
namespace {

std::string fill(std::string s, const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& [k, v] : vars)
    for (auto pos = s.find(k); pos != std::string::npos; pos = s.find(k, pos + v.size())) s.replace(pos, k.size(), v);
  return s;
}

}  // namespace

std::string format_name_with_dist(const std::string& pattern, const std::string& run_name) {
  return fill(pattern, {{"{run_name}", run_name},
                        {"{rank}", std::to_string(dist::get_global_rank())},
                        {"{local_rank}", std::to_string(dist::get_local_rank())},
                        {"{world_size}", std::to_string(dist::get_world_size())},
                        {"{local_world_size}", std::to_string(dist::get_local_world_size())},
                        {"{node_rank}", std::to_string(dist::get_node_rank())}});
}

std::string format_name(const std::string& pattern, const State& state) {
  const Timestamp& t = state.timestamp;
  return fill(format_name_with_dist(pattern, state.run_name),
              {{"{epoch}", std::to_string(t.epoch)},
               {"{batch}", std::to_string(t.batch)},
               {"{batch_in_epoch}", std::to_string(t.batch_in_epoch)},
               {"{sample}", std::to_string(t.sample)},
               {"{sample_in_epoch}", std::to_string(t.sample_in_epoch)},
               {"{token}", std::to_string(t.token)},
               {"{token_in_epoch}", std::to_string(t.token_in_epoch)},
               {"{total_wct}", std::to_string(static_cast<int64_t>(t.total_wct.count()))},
               {"{epoch_wct}", std::to_string(static_cast<int64_t>(t.epoch_wct.count()))},
               {"{batch_wct}", std::to_string(static_cast<int64_t>(t.batch_wct.count()))}});
}

}  // namespace composer
