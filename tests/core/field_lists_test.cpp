// Every options struct a user or a config sets has one field list: its repr names every field, and reading the repr
// back (as a config's keys are read) gives the same options. FSDPOptions' enums and mixed_precision read through
// core/parallelism_fields.h.
#include "composer/core/fields.h"
#include "composer/core/interval.h"
#include "composer/core/parallelism_fields.h"
#include "composer/core/registry.h"
#include "composer/data/dataset_loader.h"
#include "composer/data/mds_writer.h"
#include "composer/data/sampler.h"
#include "composer/data/tensor_data_loader.h"
#include "composer/data/vision.h"
#include "composer/models/hf_model.h"
#include "composer/models/lora.h"
#include "composer/nn/layers.h"
#include "composer/optim/grad_scaler.h"
#include "composer/storage/remote_uploader.h"
#include "composer/trainer/predict_loop.h"

#include <gtest/gtest.h>

namespace composer {
namespace {

// `changed`'s repr differs from `base`'s (the changed fields are in the list) and reads back into `base` as itself.
template <class Options>
void expect_round_trip(const char* name, const Options& base, const Options& changed) {
  const std::string repr = options_repr(name, changed);
  EXPECT_NE(repr, options_repr(name, base)) << "the changed fields are not in " << name << "'s field list";
  const auto [parsed_name, values] = parse_repr(repr);
  EXPECT_EQ(parsed_name, name);
  Hparams hparams(values, name);
  const Options back = read_options(hparams, base);
  EXPECT_EQ(options_repr(name, back), repr);
}

TEST(FieldLists, EveryOptionsStructReadsBackItsRepr) {
  expect_round_trip("GradScalerOptions", GradScalerOptions(), GradScalerOptions().init_scale(1024).enabled(false));
  expect_round_trip("LinearOptions", nn::LinearOptions(2, 3), nn::LinearOptions(4, 5).bias(false));
  expect_round_trip("Conv2dOptions", nn::Conv2dOptions(1, 2, 3), nn::Conv2dOptions(3, 8, 5).stride(2).groups(1));
  expect_round_trip("PredictLoopOptions", PredictLoopOptions(), PredictLoopOptions().subset_num_batches(3));
  expect_round_trip("SavePretrainedOptions", models::SavePretrainedOptions(),
                    models::SavePretrainedOptions().dtype(at::kBFloat16).max_shard_bytes(1000));
  expect_round_trip("LoraOptions", models::LoraOptions(),
                    models::LoraOptions().r(4).lora_alpha(16).target_modules({"q_proj", "k_proj", "o_proj"}));
  expect_round_trip("RemoteUploaderOptions", RemoteUploaderOptions(),
                    RemoteUploaderOptions().num_attempts(5).upload_staging_folder("/tmp/up"));
  expect_round_trip("MdsWriterOptions", MdsWriterOptions(),
                    MdsWriterOptions().compression("zstd:7").hashes({"sha1", "md5"}));
  expect_round_trip("SamplerOptions", SamplerOptions(), SamplerOptions().shuffle(false).seed(7).num_replicas(2));
  expect_round_trip("ImageTransformOptions", ImageTransformOptions(),
                    ImageTransformOptions().mean({0.5, 0.25, 0.125}).horizontal_flip(true));
  expect_round_trip("IntervalSchedulerOptions", IntervalSchedulerOptions(),
                    IntervalSchedulerOptions().include_end_of_training(false));
  expect_round_trip("DatasetLoaderOptions", DatasetLoaderOptions(8),
                    DatasetLoaderOptions(16).num_workers(0).drop_last(true).rank(1).num_replicas(2));
  expect_round_trip("TensorDataLoaderOptions", TensorDataLoaderOptions(8),
                    TensorDataLoaderOptions(4).shuffle(true).seed(3));
  expect_round_trip("FSDPOptions", dist::FSDPOptions(),
                    dist::FSDPOptions()
                        .sharding_strategy(dist::ShardingStrategy::HYBRID_SHARD)
                        .data_parallel_replicate_degree(2)
                        .backward_prefetch(dist::BackwardPrefetch::BACKWARD_PRE)
                        .state_dict_type("sharded")
                        .mixed_precision(dist::FSDPMixedPrecision::of("PURE")));
}

TEST(FieldLists, FsdpMixedPrecisionReadsAPresetOrDtypes) {
  Hparams dtypes({{"mixed_precision.param_dtype", "bf16"}, {"mixed_precision.reduce_dtype", "fp32"}}, "fsdp");
  const dist::FSDPOptions read = read_options<dist::FSDPOptions>(dtypes);
  EXPECT_EQ(read.mixed_precision().preset, "");
  EXPECT_EQ(read.mixed_precision().dtypes.param_dtype, at::kBFloat16);
  EXPECT_EQ(read.mixed_precision().dtypes.reduce_dtype, at::kFloat);
  EXPECT_FALSE(read.mixed_precision().dtypes.buffer_dtype.has_value());
  EXPECT_EQ(dist::field_text(read.mixed_precision()), "{'param_dtype': 'bfloat16', 'reduce_dtype': 'float32'}");
  const auto error_of = [](std::map<std::string, std::string> values) {
    try {
      Hparams h(std::move(values), "parallelism_config.fsdp");
      read_options<dist::FSDPOptions>(h);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      error_of({{"sharding_strategy", "HALF_SHARD"}}).rfind("parallelism_config.fsdp.sharding_strategy must be", 0),
      0u);
  EXPECT_EQ(error_of({{"mixed_precision.param_dtype", "int8"}})
                .rfind("parallelism_config.fsdp.mixed_precision.param_dtype must be a floating dtype", 0),
            0u);
  EXPECT_EQ(error_of({{"mixed_precision", "HALF"}}).rfind("parallelism_config.fsdp.mixed_precision must be", 0), 0u);
  EXPECT_EQ(error_of({{"wrap_policy", "x"}}).rfind("parallelism_config.fsdp.wrap_policy: unknown hyperparameter", 0),
            0u);
}

}  // namespace
}  // namespace composer
