#include "cli/build_data.h"

#include "cli/registry.h"
#include "composer/data/dataset_loader.h"
#include "composer/data/text.h"
#include "composer/data/vision.h"
#include "composer/dist/env.h"

#include <ATen/ATen.h>

namespace composer::cli {
namespace {

// Training data is sharded across ranks (each reads a disjoint part); evaluation data is read whole by every rank,
// which keeps metrics exact (their summed states divide out) without padding duplicates.
DatasetLoaderOptions loader_options(const ConfigNode& n, bool train, uint64_t seed) {
  return DatasetLoaderOptions(ConfigNode::positive(n.get_int("batch_size", 64), n.key_path("batch_size")))
      .num_replicas(train ? dist::get_world_size() : 1)
      .rank(train ? dist::get_global_rank() : 0)
      .shuffle(n.get_bool("shuffle", train))
      .seed(static_cast<uint64_t>(n.get_int("seed", static_cast<int64_t>(seed))))
      .drop_last(n.get_bool("drop_last", false))
      .num_workers(ConfigNode::positive(n.get_int("num_workers", 2), n.key_path("num_workers"), true));
}

std::string split_of(const ConfigNode& n, bool train) {
  const std::string split = n.get_string("split", train ? "train" : "test");
  if (split != "train" && split != "test")
    throw ConfigError(n.key_path("split") + ": expected 'train' or 'test', got '" + split + "'");
  return split;
}

DataSpec image_data(const ConfigNode& n, bool train, uint64_t seed, const std::string& dataset) {
  std::shared_ptr<Dataset> ds;
  DataSpec spec;
  ImageTransformOptions t;
  if (dataset == "synthetic_images") {
    const int64_t channels = n.get_int("channels", 1), size = n.get_int("size", 28),
                  classes = n.get_int("num_classes", 10);
    // The labelling (the linear function) is shared by both splits; the split picks disjoint samples.
    const int64_t count = ConfigNode::positive(n.get_int("num_samples", 1024), n.key_path("num_samples"));
    auto all = synthetic_images(2 * count, channels, size, classes, static_cast<uint64_t>(n.get_int("data_seed", 0)));
    const int64_t start = split_of(n, train) == "train" ? 0 : count;
    std::vector<std::pair<std::string, at::Tensor>> fields;
    for (const auto& [k, v] : all->data().fields()) fields.emplace_back(k, v.narrow(0, start, count));
    ds = std::make_shared<TensorDataset>(Batch(std::move(fields)));
    spec.num_classes = classes;
    spec.channels = channels;
    spec.image_size = size;
  } else {
    const bool fashion = dataset == "fashion_mnist";
    const std::string path = n.get_string("path", fashion ? "data/fashion-mnist" : "data/mnist");
    try {
      ds = load_mnist(path, split_of(n, train) == "train", n.get_int("limit", -1));
    } catch (const std::runtime_error& e) {
      throw ConfigError(n.key_path("path") + ": " + e.what());
    }
    t.mean(std::vector<double>{fashion ? 0.2860 : 0.1307}).std(std::vector<double>{fashion ? 0.3530 : 0.3081});
    spec.num_classes = 10;
    spec.channels = 1;
    spec.image_size = 28;
  }
  const ConfigNode norm = n.child("normalize");
  norm.expect_keys({"mean", "std"});
  t.mean(norm.get_doubles("mean", t.mean())).std(norm.get_doubles("std", t.std()));
  if (train) {
    t.crop_padding(ConfigNode::positive(n.get_int("crop_padding", 0), n.key_path("crop_padding"), true));
    t.horizontal_flip(n.get_bool("horizontal_flip", false));
  }
  spec.loader = std::make_shared<DatasetLoader>(ds, loader_options(n, train, seed).transform(make_image_transform(t)));
  return spec;
}

DataSpec text_data(const ConfigNode& n, bool train, uint64_t seed, const std::string& dataset) {
  DataSpec spec;
  spec.language = true;
  const int64_t seq_len = ConfigNode::positive(n.get_int("seq_len", 128), n.key_path("seq_len"));
  at::Tensor tokens;
  if (dataset == "synthetic_tokens") {
    spec.vocab_size = ConfigNode::positive(n.get_int("vocab_size", 64), n.key_path("vocab_size"));
    const int64_t count = ConfigNode::positive(n.get_int("num_samples", 256), n.key_path("num_samples"));
    auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(n.get_int("data_seed", 0)) +
                                              (split_of(n, train) == "train" ? 0 : 1));
    tokens = at::randint(spec.vocab_size, {count * seq_len + 1}, gen, at::TensorOptions().dtype(at::kLong));
  } else {
    const bool gpt2 = dataset == "gpt2_tokens";
    std::string text;
    try {
      text = load_gutenberg_text(n.get_string("path", "data/text/mobydick.txt"));
    } catch (const std::runtime_error& e) {
      throw ConfigError(n.key_path("path") + ": " + e.what());
    }
    const int64_t limit = n.get_int("text_limit", -1);
    if (limit > 0 && static_cast<size_t>(limit) < text.size()) text.resize(static_cast<size_t>(limit));
    const double val_fraction = n.get_double("val_fraction", 0.1);
    if (val_fraction <= 0 || val_fraction >= 1)
      throw ConfigError(n.key_path("val_fraction") + ": expected a number in (0, 1)");
    std::vector<int64_t> ids;
    if (gpt2) {
      const std::string dir = n.get_string("vocab_dir", "data/gpt2");
      try {
        auto tok = Gpt2Tokenizer::from_dir(dir);
        ids = tok.encode(text);
        spec.vocab_size = tok.vocab_size();
      } catch (const std::runtime_error& e) {
        throw ConfigError(n.key_path("vocab_dir") + ": " + e.what());
      }
    } else {
      CharTokenizer tok(text);  // the vocabulary comes from the whole text, so both splits share it
      ids = tok.encode(text);
      spec.vocab_size = tok.vocab_size();
    }
    const auto cut = static_cast<int64_t>(static_cast<double>(ids.size()) * (1.0 - val_fraction));
    const at::Tensor all = at::tensor(ids, at::TensorOptions().dtype(at::kLong));
    tokens = split_of(n, train) == "train" ? all.narrow(0, 0, cut) : all.narrow(0, cut, all.size(0) - cut);
  }
  std::shared_ptr<TensorDataset> ds;
  try {
    ds = make_lm_dataset(tokens, seq_len);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(n.key_path("seq_len") + ": " + e.what());
  }
  spec.loader = std::make_shared<DatasetLoader>(ds, loader_options(n, train, seed));
  return spec;
}

}  // namespace

DataSpec build_data(const ConfigNode& n, bool train, uint64_t seed) {
  n.expect_keys({"dataset",     "path",         "split",       "batch_size",  "limit",        "shuffle",
                 "seed",        "drop_last",    "num_workers", "normalize",   "crop_padding", "horizontal_flip",
                 "num_samples", "channels",     "size",        "num_classes", "data_seed",    "seq_len",
                 "text_limit",  "val_fraction", "vocab_dir",   "vocab_size"});
  const std::string dataset = n.require_string("dataset");
  require_registered("datasets", dataset, n.key_path("dataset"));
  if (dataset == "mnist" || dataset == "fashion_mnist" || dataset == "synthetic_images")
    return image_data(n, train, seed, dataset);
  return text_data(n, train, seed, dataset);
}

}  // namespace composer::cli
