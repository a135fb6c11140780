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

/// What the model was shaped for, checked on every batch: images of the first sample's size, labels in
/// [0, num_classes). A sample that breaks it names the data set's key, the column and the value.
struct BatchCheck {
  std::string where, input, label;
  std::vector<int64_t> image;  // [C, H, W], or empty: not images
  int64_t num_classes = 0;

  void operator()(const Batch& b) const {
    if (!image.empty() && b.input().sizes().slice(1) != at::IntArrayRef(image))
      throw std::runtime_error(
          where + "column '" + input + "' holds images of " + c10::str(b.input().sizes().slice(1)) +
          "; the first sample's, which the model was shaped for, are " + c10::str(at::IntArrayRef(image)));
    if (num_classes <= 0 || label.empty()) return;
    const at::Tensor y = b.target();
    if (y.is_floating_point() || y.numel() == 0) return;
    const int64_t lo = y.min().item<int64_t>(), hi = y.max().item<int64_t>();
    if (lo < 0 || hi >= num_classes)
      throw std::runtime_error(where + "column '" + label + "' holds the label " + std::to_string(lo < 0 ? lo : hi) +
                               ", outside num_classes = " + std::to_string(num_classes) + " (labels 0 to " +
                               std::to_string(num_classes - 1) + ")");
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
        const std::string where = h.where() + (h.where().empty() ? "" : ": ");
        BatchCheck check{
            where, first.fields()[0].first, first.size() > 1 ? first.fields()[1].first : "", {}, f.num_classes};
        if (x.scalar_type() == at::kByte && x.dim() == 4) {  // images: [N, C, H, W] pixels
          source.channels = x.size(1);
          source.image_size = x.size(2);
          check.image = x.sizes().slice(1).vec();
          const ImageTransformOptions t = ImageTransformOptions().mean(f.mean).std(f.stdev);
          lo.transform([t, check, normalize = make_image_transform(t)](Batch b, at::Generator& gen) {
            check(b);
            b.set(int64_t{0}, b.input().to(at::kFloat).div_(255.0));
            return normalize(std::move(b), gen);
          });
        } else if (f.num_classes > 0 && first.size() > 1) {
          lo.transform([check](Batch b, at::Generator&) {
            check(b);
            return b;
          });
        }
        source.num_classes = f.num_classes;
        source.loader = make_streaming_loader(ds, lo, request.replica_rank(), request.replicas());
        return source;
      });
}

}  // namespace composer::datasets::detail
