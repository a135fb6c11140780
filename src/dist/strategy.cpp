#include "composer/dist/strategy.h"

#include "composer/dist/dist.h"
#include "composer/dist/env.h"
#include "composer/dist/gradient_reducer.h"

#include <torch/nn/module.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace composer::dist {

DataParallel::DataParallel(int64_t bucket_bytes) : bucket_bytes_(bucket_bytes) {}
DataParallel::~DataParallel() = default;

int64_t Strategy::data_parallel_rank() const { return num_replicas() > 1 ? get_global_rank() : 0; }

int64_t DataParallel::num_replicas() const { return get_world_size(); }

void DataParallel::setup(torch::nn::Module& model, torch::optim::Optimizer*) {
  std::vector<at::Tensor> tensors = model.parameters();
  buffers_ = model.buffers();
  tensors.insert(tensors.end(), buffers_.begin(), buffers_.end());
  broadcast_module(tensors);
  reducer_ = std::make_unique<GradientReducer>(model.parameters(), bucket_bytes_);
}

void DataParallel::begin_step() {
  at::NoGradGuard no_grad;
  for (auto& b : buffers_) broadcast(b);
}

double DataParallel::mean_batch_samples(double local_samples) { return mean_over_ranks(local_samples); }

double mean_over_ranks(double local_samples) {
  at::Tensor samples = at::full({1}, local_samples, at::kDouble);
  all_reduce(samples);
  return samples.item<double>() / static_cast<double>(get_world_size());
}

void DataParallel::before_backward(bool sync) {
  if (!reducer_) throw std::logic_error("DataParallel: setup() was not called before training");
  reducer_->prepare(sync);
}

void DataParallel::after_backward(bool sync) {
  if (sync) reducer_->finalize();
}

// No hook has fired since prepare(true), so finalize() copies every accumulated gradient into its bucket.
void DataParallel::sync_gradients() {
  if (!reducer_) throw std::logic_error("DataParallel: setup() was not called before training");
  reducer_->prepare(true);
  reducer_->finalize();
}

BatchTotals DataParallel::reduce_batch(BatchTotals local) { return reduce_over_ranks(std::move(local)); }

BatchTotals reduce_over_ranks(BatchTotals local) {
  std::vector<double> values;
  for (const auto& [name, v] : local.losses) values.push_back(v);
  values.push_back(static_cast<double>(local.samples));
  values.push_back(static_cast<double>(local.tokens));
  at::Tensor reduced = at::tensor(values, at::kDouble);
  all_reduce(reduced);
  const auto r = reduced.accessor<double, 1>();
  const double world = static_cast<double>(get_world_size());
  BatchTotals out;
  size_t i = 0;
  for (const auto& [name, v] : local.losses) out.losses[name] = r[static_cast<int64_t>(i++)] / world;
  out.samples = static_cast<int64_t>(r[static_cast<int64_t>(i++)]);
  out.tokens = static_cast<int64_t>(r[static_cast<int64_t>(i)]);
  return out;
}

void DataParallel::sum_metric_state(at::Tensor& state) { all_reduce(state); }

at::Tensor DataParallel::gather_metric_rows(const at::Tensor& rows) { return all_gather_rows(rows); }

int64_t Strategy::count_ranks_with(bool local) {
  if (num_replicas() == 1) return local ? 1 : 0;
  at::Tensor count = at::full({1}, local ? 1 : 0, at::kLong);
  all_reduce(count);
  return count.item<int64_t>();
}

std::map<std::string, std::vector<double>> Strategy::parameter_sums(const torch::nn::Module& model, size_t width,
                                                                    const PartSums& part) {
  std::map<std::string, std::vector<double>> sums;  // replicated: every rank holds the whole of each parameter
  for (const auto& item : model.named_parameters()) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    std::vector<double> values = part(p, 0, p.numel());
    check_part_width(values, width);
    sums[item.key()] = std::move(values);
  }
  return sums;
}

void check_part_width(const std::vector<double>& values, size_t width) {
  if (values.size() != width) {
    throw std::logic_error("Strategy::parameter_sums: a part gave " + std::to_string(values.size()) +
                           " numbers, expected " + std::to_string(width));
  }
}

double squared_norm(const at::Tensor& t, int64_t begin, int64_t end) {
  const double n = at::linalg_vector_norm(t.reshape(-1).narrow(0, begin, end - begin)).item<double>();
  return n * n;
}

std::unique_ptr<Strategy> default_strategy() {
  if (get_world_size() == 1) return std::make_unique<SingleProcess>();
  return std::make_unique<DataParallel>();
}

}  // namespace composer::dist
