// The data set registry (core/registry.h): the built-in data sets by config name ("fashion_mnist", "mobydick_chars"),
// each built into a loader with its field list's keys (loader keys shared by all: batch_size, shuffle, seed,
// drop_last, num_workers). Composer keeps its data sets in composer.datasets; so do we.
#pragma once

#include "composer/core/registry.h"
#include "composer/data/data_loader.h"
#include "composer/data/text.h"

#include <cstdint>
#include <memory>

namespace composer::datasets {

/// A built data set: its loader and what a model's shape defaults follow.
struct DataSource {
  std::shared_ptr<DataLoader> loader;
  bool language = false;                       // batches of input_ids / labels
  int64_t vocab_size = 0;                      // language data
  std::shared_ptr<const Tokenizer> tokenizer;  // language data read from text: its ids <-> text
  int64_t num_classes = 0;                     // image data
  int64_t channels = 0;
  int64_t image_size = 0;  // image data: height = width
};

/// What the run asks of the data. Training data is sharded across the ranks (each reads a disjoint part), shuffled
/// and augmented by default, and read from the train split; evaluation data is read whole by every rank, which keeps
/// metrics exact (their summed states divide out) without padding duplicates.
struct DataRequest {
  bool train = true;
  /// The run's seed: the default loader seed.
  uint64_t seed = 42;
  /// The training data's split over the ranks (Strategy::data_parallel_size and _rank); -1: every rank its own part
  /// (the world size, this rank). Evaluation data is never split.
  int64_t num_replicas = -1;
  int64_t rank = -1;
  /// num_replicas and rank as the loader takes them (1 and 0 for evaluation data).
  int64_t replicas() const;
  int64_t replica_rank() const;
};

using DatasetRegistry = Registry<DataSource, const DataRequest&>;
const DatasetRegistry& dataset_registry();

}  // namespace composer::datasets
