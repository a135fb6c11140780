#include "composer/data/dataset_loader.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace composer {

// Workers take batch numbers in order, at most `window` ahead of the consumer, and park finished batches in
// `ready` until the consumer asks for them in order.
struct DatasetLoader::Pipeline {
  std::mutex mu;
  std::condition_variable produced, consumed;
  std::map<int64_t, Batch> ready;
  std::map<int64_t, std::exception_ptr> errors;
  int64_t next_task = 0;
  int64_t consumer = 0;
  int64_t window = 1;
  bool stop = false;
  std::vector<std::thread> threads;
};

void DatasetLoaderOptions::validate() const {
  auto positive = [](int64_t v, const char* name) {
    if (v <= 0)
      throw std::invalid_argument(std::string("DatasetLoaderOptions.") + name + " must be > 0, got " +
                                  std::to_string(v));
  };
  positive(batch_size_, "batch_size");
  positive(prefetch_factor_, "prefetch_factor");
  if (num_workers_ < 0)
    throw std::invalid_argument("DatasetLoaderOptions.num_workers must be >= 0, got " + std::to_string(num_workers_));
  SamplerOptions().num_replicas(num_replicas_).rank(rank_).validate();
  if (pin_memory_ && !torch::cuda::is_available()) {
    throw std::invalid_argument("DatasetLoaderOptions.pin_memory needs CUDA, which this build or machine lacks");
  }
}

DatasetLoader::DatasetLoader(std::shared_ptr<const Dataset> dataset, DatasetLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  if (!dataset_) throw std::invalid_argument("DatasetLoader: dataset must be set");
  options_.validate();
  if (dataset_->size() == 0) throw std::invalid_argument("DatasetLoader: the dataset is empty");
  reset();
}

DatasetLoader::~DatasetLoader() { stop_workers(); }

std::optional<int64_t> DatasetLoader::length() const {
  if (options_.sample_order()) return full_batches_;
  const int64_t r = options_.num_replicas();
  const int64_t per_rank = (dataset_->size() + r - 1) / r;
  const int64_t b = options_.batch_size();
  return options_.drop_last() ? per_rank / b : (per_rank + b - 1) / b;
}

void DatasetLoader::set_epoch(int64_t epoch) { epoch_ = epoch; }

namespace {

int64_t batches_of(int64_t samples, int64_t batch_size, bool drop_last) {
  return drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size;
}

}  // namespace

void DatasetLoader::reset() {
  stop_workers();
  cursor_ = 0;
  if (options_.sample_order()) {
    order_ = options_.sample_order()(epoch_, 0);
    num_batches_ = full_batches_ = batches_of(order_.size(0), options_.batch_size(), options_.drop_last());
    return;
  }
  order_ = sample_indices(dataset_->size(), epoch_,
                          SamplerOptions()
                              .shuffle(options_.shuffle())
                              .seed(options_.seed())
                              .num_replicas(options_.num_replicas())
                              .rank(options_.rank()));
  num_batches_ = *length();
  cursor_ = 0;
}

void DatasetLoader::resume(int64_t batch_in_epoch, int64_t sample_in_epoch) {
  if (!options_.sample_order()) return skip(batch_in_epoch);
  stop_workers();
  order_ = options_.sample_order()(epoch_, sample_in_epoch);
  num_batches_ = batches_of(order_.size(0), options_.batch_size(), options_.drop_last());
  cursor_ = 0;
}

void DatasetLoader::skip(int64_t n) {
  stop_workers();
  cursor_ = std::min(num_batches_, cursor_ + std::max<int64_t>(0, n));
}

void DatasetLoader::prepend_transform(BatchTransform transform) {
  if (!transform) throw std::invalid_argument("DatasetLoader::prepend_transform: the transform is empty");
  stop_workers();
  BatchTransform rest = options_.transform();
  if (!rest) {
    options_.transform(std::move(transform));
    return;
  }
  options_.transform([first = std::move(transform), rest = std::move(rest)](Batch batch, at::Generator& gen) {
    return rest(first(std::move(batch), gen), gen);
  });
}

std::pair<int64_t, int64_t> DatasetLoader::position() const { return {epoch_, cursor_}; }

Batch DatasetLoader::make_batch(int64_t index) const {
  const int64_t b = options_.batch_size();
  const int64_t start = index * b;
  const at::Tensor idx = order_.narrow(0, start, std::min(b, order_.size(0) - start));
  Batch batch = dataset_->get_batch(idx);
  if (options_.transform()) {
    // One generator per (seed, epoch, batch): the same batch gets the same augmentation on every run.
    const uint64_t s =
        options_.seed() * 1000003ULL + static_cast<uint64_t>(epoch_) * 7919ULL + static_cast<uint64_t>(index);
    at::Generator gen = at::detail::createCPUGenerator(s);
    batch = options_.transform()(std::move(batch), gen);
  }
  if (options_.pin_memory()) {
    std::vector<std::pair<std::string, at::Tensor>> pinned;
    for (const auto& [k, t] : batch.fields()) pinned.emplace_back(k, t.pin_memory());
    batch = Batch(std::move(pinned));
  }
  return batch;
}

void DatasetLoader::stop_workers() {
  if (!pipeline_) return;
  {
    std::lock_guard<std::mutex> lock(pipeline_->mu);
    pipeline_->stop = true;
  }
  pipeline_->consumed.notify_all();
  for (auto& t : pipeline_->threads) t.join();
  pipeline_.reset();
}

std::optional<Batch> DatasetLoader::next() {
  if (cursor_ >= num_batches_) return std::nullopt;
  if (options_.num_workers() == 0) return make_batch(cursor_++);
  if (!pipeline_) {
    pipeline_ = std::make_unique<Pipeline>();
    Pipeline& p = *pipeline_;
    p.next_task = p.consumer = cursor_;
    p.window = options_.num_workers() * options_.prefetch_factor();
    for (int64_t w = 0; w < options_.num_workers(); ++w) {
      p.threads.emplace_back([this, &p] {
        while (true) {
          int64_t i;
          {
            std::unique_lock<std::mutex> lock(p.mu);
            p.consumed.wait(
                lock, [&] { return p.stop || (p.next_task < num_batches_ && p.next_task < p.consumer + p.window); });
            if (p.stop) return;
            i = p.next_task++;
          }
          Batch b;
          std::exception_ptr err;
          try {
            b = make_batch(i);
          } catch (...) {
            err = std::current_exception();
          }
          {
            std::lock_guard<std::mutex> lock(p.mu);
            if (err) {
              p.errors[i] = err;
            } else {
              p.ready[i] = std::move(b);
            }
          }
          p.produced.notify_all();
        }
      });
    }
  }
  Pipeline& p = *pipeline_;
  std::unique_lock<std::mutex> lock(p.mu);
  p.produced.wait(lock, [&] { return p.ready.count(cursor_) || p.errors.count(cursor_); });
  if (auto it = p.errors.find(cursor_); it != p.errors.end()) {
    std::exception_ptr err = it->second;
    lock.unlock();
    stop_workers();
    std::rethrow_exception(err);
  }
  Batch b = std::move(p.ready[cursor_]);
  p.ready.erase(cursor_);
  p.consumer = ++cursor_;
  lock.unlock();
  p.consumed.notify_all();
  return b;
}

}  // namespace composer
