// ParallelismConfig: the FSDP option names and values as Composer spells them, the device mesh's sizes, and the
// strategy a config names.
#include "composer/dist/parallelism_config.h"

#include "composer/dist/env.h"
#include "composer/dist/fully_sharded.h"
#include "composer/dist/strategy.h"
#include "utils/detail/text.h"

#include <torch/nn/module.h>

#include <iostream>
#include <map>
#include <stdexcept>

namespace composer::dist {

std::string to_string(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::FULL_SHARD:
      return "FULL_SHARD";
    case ShardingStrategy::SHARD_GRAD_OP:
      return "SHARD_GRAD_OP";
    case ShardingStrategy::NO_SHARD:
      return "NO_SHARD";
    case ShardingStrategy::HYBRID_SHARD:
      return "HYBRID_SHARD";
    case ShardingStrategy::HYBRID_SHARD_ZERO2:
      return "_HYBRID_SHARD_ZERO2";
  }
  return "?";
}

ShardingStrategy sharding_strategy_from_string(const std::string& text, const std::string& key) {
  // Composer upper-cases the name before looking it up.
  const std::string lower = composer::detail::to_lower(text);
  for (ShardingStrategy s : {ShardingStrategy::FULL_SHARD, ShardingStrategy::SHARD_GRAD_OP, ShardingStrategy::NO_SHARD,
                             ShardingStrategy::HYBRID_SHARD, ShardingStrategy::HYBRID_SHARD_ZERO2})
    if (lower == composer::detail::to_lower(to_string(s))) return s;
  throw std::invalid_argument(
      key + " must be FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or _HYBRID_SHARD_ZERO2, got '" + text + "'");
}

DataParallelMesh DataParallelMesh::resolve(int64_t shard_degree, std::optional<int64_t> replicate_degree,
                                           int64_t world) {
  const auto degrees = [&] {
    return "data_parallel_shard_degree " + std::to_string(shard_degree) +
           (replicate_degree ? ", data_parallel_replicate_degree " + std::to_string(*replicate_degree) : "");
  };
  check_degree(shard_degree, "data_parallel_shard_degree");
  if (replicate_degree) check_degree(*replicate_degree, "data_parallel_replicate_degree");
  if (shard_degree == -1 && replicate_degree == -1) {
    throw std::invalid_argument("FSDP: " + degrees() +
                                ": only one of them may be -1 (it takes what the world size leaves)");
  }
  const int64_t given =
      (shard_degree == -1 ? 1 : shard_degree) * (replicate_degree && *replicate_degree != -1 ? *replicate_degree : 1);
  const bool fill = shard_degree == -1 || replicate_degree == -1;
  if (fill ? world % given != 0 : given != world) {
    throw std::invalid_argument("FSDP: " + degrees() + ": their product must " + (fill ? "divide" : "equal") +
                                " the world size " + std::to_string(world));
  }
  DataParallelMesh mesh;
  mesh.shard = shard_degree == -1 ? world / given : shard_degree;
  mesh.replicate = world / mesh.shard;
  return mesh;
}

void DataParallelMesh::check_degree(int64_t degree, const std::string& key) {
  if (degree == 0 || degree < -1)
    throw std::invalid_argument(key + " must be a positive number of ranks or -1, got " + std::to_string(degree));
}

ShardingStrategy DataParallelMesh::strategy_for(ShardingStrategy s, bool two_dimensional, bool* switched) {
  ShardingStrategy out = s;
  if (two_dimensional) {
    if (s == ShardingStrategy::NO_SHARD) {
      throw std::invalid_argument(
          "FSDP: sharding_strategy NO_SHARD with data_parallel_replicate_degree: NO_SHARD replicates on every rank "
          "already; leave the replicate degree unset, or use HYBRID_SHARD");
    }
    if (s == ShardingStrategy::FULL_SHARD) out = ShardingStrategy::HYBRID_SHARD;
    if (s == ShardingStrategy::SHARD_GRAD_OP) out = ShardingStrategy::HYBRID_SHARD_ZERO2;
  } else {
    if (s == ShardingStrategy::HYBRID_SHARD) out = ShardingStrategy::FULL_SHARD;
    if (s == ShardingStrategy::HYBRID_SHARD_ZERO2) out = ShardingStrategy::SHARD_GRAD_OP;
  }
  if (switched) *switched = out != s;
  return out;
}

std::string to_string(BackwardPrefetch p) {
  switch (p) {
    case BackwardPrefetch::BACKWARD_PRE:
      return "BACKWARD_PRE";
    case BackwardPrefetch::BACKWARD_POST:
      return "BACKWARD_POST";
    case BackwardPrefetch::NONE:
      return "NONE";
  }
  return "?";
}

BackwardPrefetch backward_prefetch_from_string(const std::string& text, const std::string& key) {
  const std::string lower = composer::detail::to_lower(text);
  for (BackwardPrefetch p : {BackwardPrefetch::BACKWARD_PRE, BackwardPrefetch::BACKWARD_POST, BackwardPrefetch::NONE})
    if (lower == composer::detail::to_lower(to_string(p))) return p;
  throw std::invalid_argument(key + " must be BACKWARD_PRE, BACKWARD_POST or NONE, got '" + text + "'");
}

at::ScalarType mixed_precision_dtype_from_string(const std::string& text, const std::string& key) {
  static const std::map<std::string, at::ScalarType> names{
      {"float32", at::kFloat},      {"torch.float32", at::kFloat},
      {"fp32", at::kFloat},         {"float16", at::kHalf},
      {"torch.float16", at::kHalf}, {"half", at::kHalf},
      {"fp16", at::kHalf},          {"amp", at::kHalf},
      {"amp_fp16", at::kHalf},      {"bfloat16", at::kBFloat16},
      {"bfloat", at::kBFloat16},    {"torch.bfloat16", at::kBFloat16},
      {"bf16", at::kBFloat16},      {"amp_bf16", at::kBFloat16},
      {"float64", at::kDouble},     {"torch.float64", at::kDouble},
      {"fp64", at::kDouble},        {"double", at::kDouble},
  };
  const auto it = names.find(text);
  if (it != names.end()) return it->second;
  throw std::invalid_argument(key + " must be a floating dtype (float32, bfloat16, float16, float64 or Composer's " +
                              "aliases such as fp32, bf16, amp_bf16), got '" + text + "'");
}

MixedPrecisionDtypes resolve_mixed_precision(const FSDPMixedPrecision& mp, at::ScalarType precision_dtype,
                                             const std::string& key) {
  if (mp.preset.empty()) return mp.dtypes;
  const std::string preset = composer::detail::to_lower(mp.preset);
  if (preset == "full") return {};
  if (preset == "default") return {precision_dtype, at::kFloat, precision_dtype};
  if (preset == "pure") return {precision_dtype, precision_dtype, precision_dtype};
  throw std::invalid_argument(key + " must be DEFAULT, PURE, FULL or a map of param_dtype, reduce_dtype and " +
                              "buffer_dtype, got '" + mp.preset + "'");
}

bool default_wrap_policy(const std::string&, const torch::nn::Module& module) {
  const std::string cls = module.name();
  for (const char* unit : {"GPTBlock", "BertLayer", "LlamaDecoderLayer", "BasicBlock", "ResNetBottleneck"}) {
    const std::string u(unit);
    if (cls.size() >= u.size() && cls.compare(cls.size() - u.size(), u.size(), u) == 0 &&
        (cls.size() == u.size() || cls[cls.size() - u.size() - 1] == ':'))
      return true;
  }
  return false;
}

void check_state_dict_type(const std::string& text, const std::string& key) {
  const std::string lower = composer::detail::to_lower(text);
  if (lower != "full" && lower != "sharded")
    throw std::invalid_argument(key + " must be 'full' or 'sharded', got '" + text + "'");
}

std::optional<std::string> ParallelismConfig::sharded_section() const {
  if (fsdp()) return std::string("parallelism_config.fsdp");
  return std::nullopt;
}

namespace {

// Composer's checks of a tp section (with the fsdp one it needs).
void validate_tp(const TPOptions& tp, const std::optional<FSDPOptions>& fsdp) {
  DataParallelMesh::check_degree(tp.tensor_parallel_degree(), "parallelism_config.tp.tensor_parallel_degree");
  if (!fsdp) {
    throw std::invalid_argument(
        "parallelism_config.tp needs parallelism_config.fsdp (as in Composer): give fsdp: {} for FSDP's defaults");
  }
  if (tp.tensor_parallel_degree() == 1) return;
  if (fsdp->load_monolith_rank0_only())
    throw std::invalid_argument("parallelism_config.fsdp.load_monolith_rank0_only is not compatible with tp");
}

}  // namespace

void ParallelismConfig::validate() const {
  if (tp()) validate_tp(*tp(), fsdp());
  if (!fsdp()) return;
  // Early, with the keys' paths: the mesh itself is sized when training starts, from the world size.
  DataParallelMesh::check_degree(fsdp()->data_parallel_shard_degree(),
                                 "parallelism_config.fsdp.data_parallel_shard_degree");
  if (const auto replicate = fsdp()->data_parallel_replicate_degree())
    DataParallelMesh::check_degree(*replicate, "parallelism_config.fsdp.data_parallel_replicate_degree");
  check_state_dict_type(fsdp()->state_dict_type(), "parallelism_config.fsdp.state_dict_type");
  (void)resolve_mixed_precision(fsdp()->mixed_precision(), at::kFloat, "parallelism_config.fsdp.mixed_precision");
  if (fsdp()->activation_cpu_offload() && !fsdp()->activation_checkpointing()) {
    throw std::invalid_argument(
        "parallelism_config.fsdp.activation_cpu_offload needs activation_checkpointing: true (Composer C++ offloads "
        "the inputs the checkpointed modules keep; offloading every saved activation needs PyTorch's saved-tensor "
        "hooks, which LibTorch takes as Python objects only)");
  }
}

std::unique_ptr<Strategy> make_strategy(const ParallelismConfig& config, at::ScalarType precision_dtype) {
  if (config.fsdp()) {
    std::optional<TPOptions> tp = config.tp();
    if (tp && tp->tensor_parallel_degree() == 1) {  // Composer warns and drops it
      if (get_global_rank() == 0)
        std::cerr << "composer: warning: parallelism_config.tp.tensor_parallel_degree is 1: no tensor parallelism\n";
      tp.reset();
    }
    return std::make_unique<FullyShardedDataParallel>(*config.fsdp(), precision_dtype, tp);
  }
  return default_strategy();
}

}  // namespace composer::dist
