#include "composer/data/streaming_dataset.h"
#include "composer/data/vision.h"
#include "composer/dist/env.h"
#include "datasets/detail/entries.h"
#include "datasets/detail/loader_fields.h"

#include <ATen/ATen.h>

namespace composer::datasets::detail {
namespace {

// The YAML keys of `dataset: streaming`: StreamingDataset's own (remote, local, split, ...), the loader's, and for
// image columns the normalization applied after scaling uint8 pixels to [0, 1].
struct StreamingFields {
  StreamingDatasetOptions streaming;
  std::vector<double> mean{0.0};
  std::vector<double> stdev{1.0};
  int64_t num_classes = 0;
  LoaderFields loader;

  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    // shuffle and its seed are the loader's keys (below), as for every data set.
    StreamingDatasetOptions::for_each_field(self.streaming, [&](const char* key, auto& member, const char* doc) {
      if (std::string(key) != "shuffle" && std::string(key) != "shuffle_seed") visit(key, member, doc);
    });
    visit("normalize.mean", self.mean, "image columns: per-channel mean after scaling to [0, 1]");
    visit("normalize.std", self.stdev, "image columns: per-channel standard deviation");
    visit("num_classes", self.num_classes, "classes of the labels, for the model's shape; 0: not given");
    LoaderFields::for_each_field(self.loader, visit);
  }
};

}  // namespace

DatasetRegistry::Entry streaming_entry() {
  return dataset_entry(
      "streaming", "StreamingDataset", "MosaicML Streaming MDS shards, local or from an object store",
      StreamingFields(), [](Hparams& h, const StreamingFields& f, const DataRequest& request) {
        if (f.num_classes < 0)
          h.error("num_classes",
                  "expected 0 (not given) or a positive number of classes, got " + std::to_string(f.num_classes));
        StreamingDatasetOptions o = f.streaming;
        DatasetLoaderOptions lo = loader_options(h, f.loader, request);
        o.shuffle(f.loader.shuffle.value_or(request.train)).shuffle_seed(static_cast<int64_t>(lo.seed()));
        std::shared_ptr<StreamingDataset> ds;
        try {
          ds = std::make_shared<StreamingDataset>(o);
        } catch (const std::invalid_argument& e) {
          h.error(o.remote().empty() ? "local" : "remote", e.what());
        }
        DataSource source;
        const Batch first = ds->get_batch(at::zeros({1}, at::kLong));
        const at::Tensor x = first.input();
        if (x.scalar_type() == at::kByte && x.dim() == 4) {  // images: [N, C, H, W] pixels
          source.channels = x.size(1);
          source.image_size = x.size(2);
          const ImageTransformOptions t = ImageTransformOptions().mean(f.mean).std(f.stdev);
          lo.transform([t, normalize = make_image_transform(t)](Batch b, at::Generator& gen) {
            b.set(int64_t{0}, b.input().to(at::kFloat).div_(255.0));
            return normalize(std::move(b), gen);
          });
        }
        source.num_classes = f.num_classes;
        source.loader = make_streaming_loader(ds, lo, request.train ? dist::get_global_rank() : 0,
                                              request.train ? dist::get_world_size() : 1);
        return source;
      });
}

}  // namespace composer::datasets::detail
