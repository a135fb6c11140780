#include "composer/data/vision.h"
#include "datasets/detail/entries.h"
#include "datasets/detail/loader_fields.h"

namespace composer::datasets::detail {
namespace {

// Keys every image data set takes besides the loader's: normalization and (training only) augmentation.
struct ImageFields {
  std::vector<double> mean{0.0};
  std::vector<double> stdev{1.0};
  int64_t crop_padding = 0;
  bool horizontal_flip = false;

  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("normalize.mean", self.mean, "per-channel mean after scaling to [0, 1]");
    visit("normalize.std", self.stdev, "per-channel standard deviation");
    visit("crop_padding", self.crop_padding, "random crops after this much zero padding (training only); 0: none");
    visit("horizontal_flip", self.horizontal_flip, "random horizontal flips (training only)");
  }
};

DataSource image_source(Hparams& h, std::shared_ptr<Dataset> ds, const ImageFields& f, const LoaderFields& loader,
                        const DataRequest& request) {
  ImageTransformOptions t;
  t.mean(f.mean).std(f.stdev);
  if (request.train) {
    t.crop_padding(positive(h, "crop_padding", f.crop_padding, /*allow_zero=*/true));
    t.horizontal_flip(f.horizontal_flip);
  }
  DataSource source;
  source.loader = std::make_shared<DatasetLoader>(
      std::move(ds), loader_options(h, loader, request).transform(make_image_transform(t)));
  return source;
}

struct MnistFields {
  std::string path;
  std::optional<std::string> split;
  int64_t limit = -1;
  ImageFields image;
  LoaderFields loader;

  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("path", self.path, "folder of the IDX files (tools/fetch_data.sh)");
    visit("split", self.split, "'train' or 'test'; unset: train for training data, test for evaluation");
    visit("limit", self.limit, "read only the first this many images; -1: all");
    ImageFields::for_each_field(self.image, visit);
    LoaderFields::for_each_field(self.loader, visit);
  }
};

struct SyntheticImageFields {
  int64_t num_samples = 1024;
  int64_t channels = 1;
  int64_t size = 28;
  int64_t num_classes = 10;
  int64_t data_seed = 0;
  std::optional<std::string> split;
  ImageFields image;
  LoaderFields loader;

  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("num_samples", self.num_samples, "images per split");
    visit("channels", self.channels, "image channels");
    visit("size", self.size, "image height and width");
    visit("num_classes", self.num_classes, "classes of the labelling");
    visit("data_seed", self.data_seed, "seed of the images and their labelling");
    visit("split", self.split, "'train' or 'test' (disjoint samples, one labelling); unset: as the data's role");
    ImageFields::for_each_field(self.image, visit);
    LoaderFields::for_each_field(self.loader, visit);
  }
};

}  // namespace

DatasetRegistry::Entry mnist_entry(bool fashion) {
  MnistFields defaults;
  defaults.path = fashion ? "data/fashion-mnist" : "data/mnist";
  defaults.image.mean = {fashion ? 0.2860 : 0.1307};
  defaults.image.stdev = {fashion ? 0.3530 : 0.3081};
  return dataset_entry(fashion ? "fashion_mnist" : "mnist", fashion ? "FashionMNIST" : "MNIST",
                       fashion ? "Fashion-MNIST from gzip IDX files" : "MNIST digits from IDX files", defaults,
                       [](Hparams& h, const MnistFields& f, const DataRequest& request) {
                         std::shared_ptr<Dataset> ds;
                         try {
                           ds = load_mnist(f.path, split_of(h, f.split, request) == "train", f.limit);
                         } catch (const std::runtime_error& e) {
                           h.error("path", e.what());
                         }
                         DataSource source = image_source(h, ds, f.image, f.loader, request);
                         source.num_classes = 10;
                         source.channels = 1;
                         source.image_size = 28;
                         return source;
                       });
}

DatasetRegistry::Entry synthetic_images_entry() {
  return dataset_entry(
      "synthetic_images", "SyntheticImages", "random images with a learnable labelling", SyntheticImageFields(),
      [](Hparams& h, const SyntheticImageFields& f, const DataRequest& request) {
        // The labelling (the linear function) is shared by both splits; the split picks disjoint samples.
        const int64_t count = positive(h, "num_samples", f.num_samples);
        auto all = synthetic_images(2 * count, positive(h, "channels", f.channels), positive(h, "size", f.size),
                                    positive(h, "num_classes", f.num_classes), static_cast<uint64_t>(f.data_seed));
        const int64_t start = split_of(h, f.split, request) == "train" ? 0 : count;
        std::vector<std::pair<std::string, at::Tensor>> fields;
        for (const auto& [k, v] : all->data().fields()) fields.emplace_back(k, v.narrow(0, start, count));
        DataSource source =
            image_source(h, std::make_shared<TensorDataset>(Batch(std::move(fields))), f.image, f.loader, request);
        source.num_classes = f.num_classes;
        source.channels = f.channels;
        source.image_size = f.size;
        return source;
      });
}

}  // namespace composer::datasets::detail
