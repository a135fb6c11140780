// A rank for the distributed tests. Modes:
//   ddp_worker train OUT MICROBATCH GLOBAL_BATCH [TYPE:THRESHOLD]   fp64 training (with GradientClipping when the
//                                                  last argument is given, SAM for sam:RHO); rank 0 writes the
//                                                  final weights to OUT
//   ddp_worker sam_reference OUT GLOBAL_BATCH RHO  one process computing what 2-rank SAM training must give: each
//                                                  rank ascends along its own gradient, the descent gradients at the
//                                                  two perturbed points are averaged
//   ddp_worker reducer                             bucketed all-reduce vs a plain all-reduce of every gradient
//   ddp_worker die TIMEOUT_S                       rank 1 exits with code 3; rank 0 keeps running for 60 s
//   ddp_worker rendezvous TIMEOUT_S                only joins the process group
//   ddp_worker lm_tokens OUT MICROBATCH GLOBAL_BATCH  a float64 GPT on padded sequences with
//                                                  accumulate_train_batch_on_tokens; rank 0 writes the weights
//   ddp_worker killed_peer                         rank 1 SIGKILLs itself inside a training step; rank 0 must fail
//                                                  with a message, never std::terminate
//   ddp_worker metric_rows                         a list-state metric (BinaryAUROC) gathered over ranks holding
//                                                  different numbers of samples, against one process's
#include "support/clipping_spec.h"

#include "composer/composer.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <csignal>
#include <iostream>
#include <thread>

#include <unistd.h>

using namespace composer;

namespace {

std::shared_ptr<ComposerClassifier> model_for_rank(uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Sequential net(torch::nn::Linear(8, 32), torch::nn::Tanh(), torch::nn::Linear(32, 4));
  net->to(at::kDouble);
  return ComposerClassifier::wrap(net);
}

Batch data() {
  auto gen = at::detail::createCPUGenerator(1);
  at::Tensor x = at::randn({256, 8}, gen, at::TensorOptions().dtype(at::kDouble));
  at::Tensor y = x.matmul(at::randn({8, 4}, gen, at::TensorOptions().dtype(at::kDouble))).argmax(1);
  return Batch(x, y);
}

void write_weights(const std::string& out, torch::nn::Module& model) {
  Dict w(c10::StringType::get(), c10::TensorType::get());
  for (const auto& p : model.named_parameters()) w.insert(p.key(), p.value());
  write_file_atomically(out, torch::pickle_save(w));
}

int train(const std::string& out, int64_t microbatch, int64_t global_batch, const std::string& clipping) {
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();
  auto model = model_for_rank(100 + static_cast<uint64_t>(rank));  // different on each rank: the broadcast fixes it
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto loader = std::make_shared<DatasetLoader>(
      std::make_shared<TensorDataset>(data()),
      DatasetLoaderOptions(global_batch / world).shuffle(true).seed(3).num_workers(0).num_replicas(world).rank(rank));
  std::vector<std::shared_ptr<Algorithm>> algos;
  if (clipping.rfind("sam:", 0) == 0) {
    algos.push_back(algorithms::make_algorithm("sam", {{"rho", clipping.substr(4)}}));
  } else if (!clipping.empty()) {
    algos.push_back(testing::gradient_clipping_from_spec(clipping));
  }
  Trainer trainer(TrainerOptions(model)
                      .algorithms(algos)
                      .train_dataloader(loader)
                      .optimizer(opt)
                      .max_duration("6ba")
                      .device("cpu")
                      .seed(7)
                      .progress_bar(false)
                      .dist_timeout(60)
                      .device_train_microbatch_size(microbatch));
  trainer.fit();
  if (rank == 0) {
    write_weights(out, *model);
    std::cout << "loss " << trainer.state().total_loss_dict["loss/train/total"] << std::endl;
  }
  trainer.close();
  return 0;
}

// 2-rank SAM by hand, in one process: the batches each rank's shard gives, e_r = rho * g_r / (||g_r|| + 1e-12) from
// rank r's own gradient, the gradients at w + e_r averaged over the ranks, then SGD with momentum at w.
int sam_reference(const std::string& out, int64_t global_batch, double rho) {
  auto model = model_for_rank(100);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<std::shared_ptr<DatasetLoader>> loaders;
  for (int64_t r = 0; r < 2; ++r) {
    loaders.push_back(std::make_shared<DatasetLoader>(
        std::make_shared<TensorDataset>(data()),
        DatasetLoaderOptions(global_batch / 2).shuffle(true).seed(3).num_workers(0).num_replicas(2).rank(r)));
    loaders.back()->set_epoch(0);
    loaders.back()->reset();
  }
  auto params = model->parameters();
  auto grads_at = [&](const Batch& b) {
    for (auto& p : params) p.mutable_grad().reset();
    model->loss(model->forward(b), b).backward();
    std::vector<at::Tensor> g;
    for (auto& p : params) g.push_back(p.grad().clone());
    return g;
  };
  for (int step = 0; step < 6; ++step) {
    std::vector<at::Tensor> descent(params.size());
    for (auto& loader : loaders) {
      const Batch b = *loader->next();
      const auto g = grads_at(b);
      std::vector<at::Tensor> norms;
      for (const auto& t : g) norms.push_back(t.norm(2));
      const at::Tensor scale = rho / (at::stack(norms).norm(2) + 1e-12);
      std::vector<at::Tensor> e;
      {
        at::NoGradGuard no_grad;
        for (size_t i = 0; i < params.size(); ++i) {
          e.push_back(g[i] * scale);
          params[i].add_(e[i]);
        }
      }
      const auto g_perturbed = grads_at(b);
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) {
        params[i].sub_(e[i]);
        descent[i] = descent[i].defined() ? descent[i] + g_perturbed[i] : g_perturbed[i];
      }
    }
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = descent[i] / 2.0;
    opt.step();
  }
  write_weights(out, *model);
  return 0;
}

// 4 ranks: the shard groups {0, 1}, {2, 3} and the replica groups {0, 2}, {1, 3} (as HYBRID_SHARD makes them), a
// collective of each kind in each; prints what each rank got.
int groups() {
  dist::initialize_dist(c10::Device(c10::kCPU), std::chrono::seconds(60));
  const int64_t rank = dist::get_global_rank();
  const dist::Group pair = dist::new_group({rank / 2 * 2, rank / 2 * 2 + 1});
  const dist::Group across = dist::new_group({rank % 2 + 2, rank % 2});  // given unsorted
  at::Tensor sum = at::full({1}, static_cast<double>(rank + 1), at::kDouble);
  dist::all_reduce(sum, dist::ReduceOp::SUM, pair);
  at::Tensor across_sum = at::full({1}, static_cast<double>(rank + 1), at::kDouble);
  dist::all_reduce_async(across_sum, across).wait();
  std::string gathered;
  for (const auto& t : dist::all_gather(at::full({1}, rank, at::kLong), across))
    gathered += std::to_string(t.item<int64_t>()) + ",";
  at::Tensor flat = at::empty({4}, at::kDouble);
  dist::all_gather_into_async(flat, at::full({2}, static_cast<double>(rank), at::kDouble), pair).wait();
  at::Tensor in = at::arange(4, at::kDouble) * static_cast<double>(rank + 1), out = at::empty({2}, at::kDouble);
  dist::reduce_scatter_async(out, in, pair).wait();
  std::cout << "pair_rank " << pair.rank() << " of " << pair.size() << " across_rank " << across.rank() << " of "
            << across.size() << " sum " << sum.item<double>() << " across_sum " << across_sum.item<double>()
            << " gathered " << gathered << " flat " << flat[0].item<double>() << "," << flat[3].item<double>()
            << " scattered " << out[0].item<double>() << "," << out[1].item<double>() << std::endl;
  return 0;
}

int reducer() {
  dist::initialize_dist(c10::Device(c10::kCPU), std::chrono::seconds(60));
  const int64_t rank = dist::get_global_rank();
  auto a = model_for_rank(5), b = model_for_rank(5);
  dist::GradientReducer reducer(a->parameters(), /*bucket_bytes=*/512);  // several buckets
  const Batch batch = data();
  const Batch mine(batch.input().narrow(0, rank * 16, 16), batch.target().narrow(0, rank * 16, 16));
  // Two microbatches on `a` (the first only accumulates), the same on `b` followed by a plain all-reduce.
  for (int mb = 0; mb < 2; ++mb) {
    const Batch part(mine.input().narrow(0, mb * 8, 8), mine.target().narrow(0, mb * 8, 8));
    reducer.prepare(mb == 1);
    a->loss(a->forward(part), part).backward();
    if (mb == 1) reducer.finalize();
    b->loss(b->forward(part), part).backward();
  }
  double max_diff = 0;
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    at::Tensor g = pb[i].grad().clone();
    dist::all_reduce(g);
    g.div_(static_cast<double>(dist::get_world_size()));
    max_diff = std::max(max_diff, (g - pa[i].grad()).abs().max().item<double>());
  }
  std::cout << "buckets " << reducer.num_buckets() << " max_diff " << max_diff << " listening on "
            << dist::listen_address() << std::endl;
  return 0;
}

// 64 sequences whose labels end in 2 * (i % 8) ignored positions, so ranks and microbatches hold different numbers of
// loss-generating tokens: weighted by tokens, every split must give the per-token mean of the global batch.
int lm_tokens(const std::string& out, int64_t microbatch, int64_t global_batch) {
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();
  auto gen = at::detail::createCPUGenerator(2);
  const at::Tensor tokens = at::randint(0, 13, {64, 17}, gen, at::TensorOptions().dtype(at::kLong));
  at::Tensor labels = tokens.narrow(1, 1, 16).clone();
  for (int64_t i = 0; i < 64; ++i) labels[i].narrow(0, 16 - 2 * (i % 8), 2 * (i % 8)).fill_(-100);
  const Batch data({{"input_ids", tokens.narrow(1, 0, 16).contiguous()}, {"labels", labels}});
  torch::manual_seed(11);
  auto gpt = std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(13).max_seq_len(16).n_layer(1).n_head(2).d_model(8).dropout(0.0));
  gpt->to(at::kDouble);
  auto model = std::make_shared<ComposerLanguageModel>(gpt);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.5));
  auto loader = std::make_shared<DatasetLoader>(
      std::make_shared<TensorDataset>(data),
      DatasetLoaderOptions(global_batch / world).shuffle(true).seed(3).num_workers(0).num_replicas(world).rank(rank));
  Trainer trainer(TrainerOptions(model)
                      .train_dataloader(loader)
                      .optimizer(opt)
                      .max_duration("4ba")
                      .device("cpu")
                      .seed(7)
                      .progress_bar(false)
                      .dist_timeout(60)
                      .accumulate_train_batch_on_tokens(true)
                      .device_train_microbatch_size(microbatch));
  trainer.fit();
  if (rank == 0) write_weights(out, *model);
  trainer.close();
  return 0;
}

// Kills its own process (SIGKILL: no handler, no unwinding) after the forward of batch `batch` on rank 1, so that
// rank 0 meets the death inside the step's gradient collectives.
class KillRankOneAt : public Callback {
 public:
  explicit KillRankOneAt(int64_t batch) : batch_(batch) {}
  void after_forward(State& state, Logger&) override {
    if (dist::get_global_rank() == 1 && state.timestamp.batch == batch_) ::raise(SIGKILL);
  }

 private:
  int64_t batch_;
};

int killed_peer() {
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();
  auto model = model_for_rank(100);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  auto loader = std::make_shared<DatasetLoader>(
      std::make_shared<TensorDataset>(data()),
      DatasetLoaderOptions(16).shuffle(true).seed(3).num_workers(1).num_replicas(world).rank(rank));
  Trainer trainer(TrainerOptions(model)
                      .train_dataloader(loader)
                      .optimizer(opt)
                      .callbacks({std::make_shared<KillRankOneAt>(2)})
                      .max_duration("40ba")
                      .device("cpu")
                      .seed(7)
                      .progress_bar(false)
                      .dist_timeout(20)
                      .device_train_microbatch_size(4));
  trainer.fit();
  return 0;
}

// Rank r holds 3 + 2r of 20 fixed (probability, target) pairs, after the ranks before it; ties included.
int metric_rows() {
  dist::initialize_dist(c10::Device(c10::kCPU), std::chrono::seconds(60));
  const int64_t rank = dist::get_global_rank(), world = dist::get_world_size();
  auto gen = at::detail::createCPUGenerator(5);
  const at::Tensor preds = at::rand({20}, gen, at::TensorOptions().dtype(at::kDouble)).mul(10).round().div(10);
  const at::Tensor target = at::randint(0, 2, {20}, gen, at::TensorOptions().dtype(at::kLong));
  int64_t start = 0, total = 0;
  for (int64_t r = 0; r < world; ++r) {
    if (r < rank) start += 3 + 2 * r;
    total += 3 + 2 * r;
  }
  BinaryAUROC local;
  local.update(preds.narrow(0, start, 3 + 2 * rank), target.narrow(0, start, 3 + 2 * rank));
  dist::DataParallel strategy;
  BinaryAUROC gathered, one;
  gathered.set_rows(strategy.gather_metric_rows(local.rows()));
  one.update(preds.narrow(0, 0, total), target.narrow(0, 0, total));
  std::cout << "[rank " << rank << "] rows " << gathered.rows().size(0) << " same "
            << at::equal(gathered.rows(), one.rows()) << " auroc " << gathered.compute() << " vs " << one.compute()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "train" && (argc == 5 || argc == 6))
      return train(argv[2], std::atoll(argv[3]), std::atoll(argv[4]), argc == 6 ? argv[5] : "");
    if (mode == "reducer") return reducer();
    if (mode == "groups") return groups();
    if (mode == "metric_rows") return metric_rows();
    if (mode == "killed_peer") return killed_peer();
    if (mode == "lm_tokens" && argc == 5) return lm_tokens(argv[2], std::atoll(argv[3]), std::atoll(argv[4]));
    if (mode == "sam_reference" && argc == 5) return sam_reference(argv[2], std::atoll(argv[3]), std::atof(argv[4]));
    if (mode == "unsharded") {  // a multi-rank run whose loader does not shard: the Trainer must refuse it
      auto model = model_for_rank(1);
      auto loader = std::make_shared<TensorDataLoader>(data(), TensorDataLoaderOptions(16));
      Trainer trainer(
          TrainerOptions(model).train_dataloader(loader).max_duration("1ba").device("cpu").dist_timeout(30));
      return 0;
    }
    if (mode == "orphan" && argc == 3) {  // rank 1 leaves; rank 0's collective must fail with a message, not hang
      dist::initialize_dist(c10::Device(c10::kCPU),
                            std::chrono::milliseconds(static_cast<int64_t>(std::atof(argv[2]) * 1000)));
      if (dist::get_global_rank() == 1) return 0;
      dist::barrier();
      return 0;
    }
    if (mode == "seed") {  // no seed, no run name: both come from rank 0
      Trainer trainer(TrainerOptions(ComposerClassifier::wrap(torch::nn::Sequential(torch::nn::Linear(2, 2))))
                          .progress_bar(false)
                          .device("cpu"));
      std::cout << "rank_zero_seed " << trainer.state().rank_zero_seed << " seed " << trainer.state().seed
                << " run_name " << trainer.state().run_name << std::endl;
      return 0;
    }
    if (mode == "sleep") {  // both ranks ready, then busy: for signals sent to the launcher
      dist::initialize_dist(c10::Device(c10::kCPU), std::chrono::milliseconds(30000));
      std::cout << "ready pid=" << ::getpid() << std::endl;
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 0;
    }
    if ((mode == "die" || mode == "rendezvous") && argc == 3) {
      dist::initialize_dist(c10::Device(c10::kCPU),
                            std::chrono::milliseconds(static_cast<int64_t>(std::atof(argv[2]) * 1000)));
      if (mode == "rendezvous") return 0;
      if (dist::get_global_rank() == 1) return 3;
      std::this_thread::sleep_for(std::chrono::seconds(60));  // a rank busy for long: the launcher must stop it
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "ddp_worker: " << e.what() << std::endl;
    return 1;
  }
  std::cerr << "usage: ddp_worker train OUT MICROBATCH GLOBAL_BATCH | reducer | die TIMEOUT_S | rendezvous TIMEOUT_S\n";
  return 2;
}
