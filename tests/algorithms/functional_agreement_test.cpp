// For every registered algorithm, the Algorithm class and its composer::functional form give the same result from
// the same random state.
#include "algorithms/algo_support.h"

#include <gtest/gtest.h>

using namespace composer;
using composer::testing::tiny_convnet;

namespace {

struct Run {
  Run() : logger(state) {
    torch::manual_seed(11);
    state.batch = Batch(torch::randn({8, 3, 16, 16}), torch::arange(8) % 4);
    state.outputs = torch::randn({8, 4});
    state.max_duration = Time::from_batch(100);
    state.timestamp.batch = 65;
  }
  State state;
  Logger logger;
};

// Runs `algorithm` at `event` on a fresh Run seeded with `seed`, returns the batch field `key`.
at::Tensor class_batch(const std::string& name, Event event, int64_t key, uint64_t seed = 5) {
  Run run;
  auto algorithm = algorithms::make_algorithm(name);
  torch::manual_seed(seed);
  algorithm->apply(event, run.state, run.logger);
  return run.state.batch.at(key);
}

// Model surgery through the class (at INIT on a State) and through `fn`; outputs of the two models in eval mode.
void expect_same_model(const std::string& name, const std::function<void(torch::nn::Module&)>& fn,
                       const std::map<std::string, std::string>& hparams = {}) {
  Run run;
  auto via_class = tiny_convnet(0);
  run.state.model = ComposerClassifier::wrap(via_class);
  torch::manual_seed(21);
  algorithms::make_algorithm(name, hparams)->apply(Event::INIT, run.state, run.logger);
  auto via_fn = tiny_convnet(0);
  torch::manual_seed(21);
  fn(*via_fn);
  via_class->eval();
  via_fn->eval();
  const at::Tensor x = torch::randn({4, 3, 16, 16});
  EXPECT_TRUE(torch::allclose(via_class->forward(x), via_fn->forward(x))) << name;
  EXPECT_EQ(via_class->named_parameters().keys(), via_fn->named_parameters().keys()) << name;
}

// The first batch of a DatasetLoader with the algorithm installed at FIT_START vs one built with `transform`.
void expect_same_loader_batch(const std::string& name, const BatchTransform& transform) {
  Run run;
  run.state.train_dataloader = std::make_shared<DatasetLoader>(composer::testing::tiny_images(16),
                                                               DatasetLoaderOptions(8).shuffle(false).num_workers(0));
  algorithms::make_algorithm(name)->apply(Event::FIT_START, run.state, run.logger);
  DatasetLoader direct(composer::testing::tiny_images(16),
                       DatasetLoaderOptions(8).shuffle(false).num_workers(0).transform(transform));
  for (DataLoader* l : {run.state.train_dataloader.get(), static_cast<DataLoader*>(&direct)}) {
    l->set_epoch(0);
    l->reset();
  }
  const Batch a = *run.state.train_dataloader->next(), b = *direct.next();
  EXPECT_TRUE(torch::equal(a.input(), b.input())) << name;
  EXPECT_FALSE(torch::equal(a.input(), composer::testing::tiny_images(16)->data().input().slice(0, 0, 8))) << name;
}

const std::map<std::string, std::function<void()>>& checks() {
  static const std::map<std::string, std::function<void()>> c{
      {"augmix", [] { expect_same_loader_batch("augmix", functional::augmix_transform()); }},
      {"randaugment", [] { expect_same_loader_batch("randaugment", functional::randaugment_transform()); }},
      {"blurpool", [] { expect_same_model("blurpool", [](torch::nn::Module& m) { functional::apply_blurpool(m); }); }},
      {"channels_last",
       [] { expect_same_model("channels_last", [](torch::nn::Module& m) { functional::apply_channels_last(m); }); }},
      {"factorize",
       [] {
         expect_same_model(
             "factorize",
             [](torch::nn::Module& m) {
               functional::apply_factorization(
                   m, functional::FactorizeOptions().min_channels(4).latent_channels(2).min_features(8).latent_features(
                          2));
             },
             {{"min_channels", "4"}, {"latent_channels", "2"}, {"min_features", "8"}, {"latent_features", "2"}});
       }},
      {"ghost_batchnorm",
       [] {
         expect_same_model("ghost_batchnorm", [](torch::nn::Module& m) { functional::apply_ghost_batchnorm(m); });
       }},
      {"squeeze_excite",
       [] {
         expect_same_model("squeeze_excite",
                           [](torch::nn::Module& m) {
                             functional::apply_squeeze_excite(
                                 m, functional::SqueezeExciteOptions().min_channels(16).latent_channels(4));
                           },
                           {{"min_channels", "16"}, {"latent_channels", "4"}});
       }},
      {"stochastic_depth",
       [] {
         expect_same_model("stochastic_depth", [](torch::nn::Module& m) { functional::apply_stochastic_depth(m); });
       }},
      {"weight_standardization",
       [] {
         expect_same_model("weight_standardization",
                           [](torch::nn::Module& m) { functional::apply_weight_standardization(m); });
       }},
      {"cutout",
       [] {
         Run run;
         torch::manual_seed(5);
         EXPECT_TRUE(torch::equal(class_batch("cutout", Event::AFTER_DATALOADER, 0),
                                  functional::cutout_batch(run.state.batch.input())));
       }},
      {"colout",
       [] {
         Run run;
         torch::manual_seed(5);
         EXPECT_TRUE(torch::equal(class_batch("colout", Event::AFTER_DATALOADER, 0),
                                  functional::colout_batch(run.state.batch.input()).first));
       }},
      {"progressive_resizing",
       [] {
         Run run;  // elapsed 0.65: scale 0.75, width round(16 * 0.75 / 4) * 4 = 12
         EXPECT_TRUE(torch::equal(class_batch("progressive_resizing", Event::AFTER_DATALOADER, 0),
                                  functional::resize_batch(run.state.batch.input(), {}, 12.0 / 16.0).first));
       }},
      {"mixup",
       [] {
         Run run;
         torch::manual_seed(5);
         const auto [x, y, m] = functional::mixup_batch(run.state.batch.input(), run.state.batch.target());
         EXPECT_TRUE(torch::allclose(class_batch("mixup", Event::BEFORE_FORWARD, 0), x));
       }},
      {"cutmix",
       [] {
         Run run;
         torch::manual_seed(5);
         const auto [x, y, lam, box] = functional::cutmix_batch(run.state.batch.input(), run.state.batch.target());
         EXPECT_TRUE(torch::equal(class_batch("cutmix", Event::BEFORE_FORWARD, 0), x));
       }},
      {"gradient_clipping",
       [] {
         // The same gradients clipped by the class at AFTER_TRAIN_BATCH and by the functional form.
         std::vector<std::shared_ptr<nn::Sequential>> nets;
         for (int i = 0; i < 2; ++i) {
           nets.push_back(tiny_convnet(0));
           torch::manual_seed(3);
           nets.back()->forward(torch::randn({4, 3, 16, 16})).pow(2).sum().backward();
         }
         Run run;
         run.state.model = ComposerClassifier::wrap(nets[0]);
         composer::testing::make_example("gradient_clipping")->apply(Event::AFTER_TRAIN_BATCH, run.state, run.logger);
         functional::apply_gradient_clipping(nets[1]->parameters(), functional::ClippingType::NORM, 0.5);
         const auto a = nets[0]->parameters(), b = nets[1]->parameters();
         for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].grad(), b[i].grad())) << i;
       }},
      {"seq_length_warmup",
       [] {
         Run run;
         auto loader = composer::testing::tiny_token_loader(8, 8);
         loader->reset();
         run.state.batch = *loader->next();
         const Batch original = run.state.batch;
         auto algorithm = algorithms::make_algorithm(
             "seq_length_warmup", {{"min_seq_length", "8"}, {"max_seq_length", "32"}, {"duration", "0.5"}});
         algorithm->apply(Event::AFTER_DATALOADER, run.state, run.logger);  // batch 65 of 100: past the warmup
         const int64_t length = functional::warmup_sequence_length(65, 100, 0.5, 8, 32, 8);
         EXPECT_EQ(length, 32);
         const Batch expected = functional::set_batch_sequence_length(original, length);
         EXPECT_TRUE(torch::equal(run.state.batch.at(std::string("input_ids")), expected.at(std::string("input_ids"))));
         run.state.timestamp.batch = 20;  // 3 increments every 50 / 3 = 16 batches: 8 + 8 * (20 / 16) = 16
         run.state.batch = original;
         algorithm->apply(Event::AFTER_DATALOADER, run.state, run.logger);
         EXPECT_EQ(functional::warmup_sequence_length(20, 100, 0.5, 8, 32, 8), 16);
         EXPECT_TRUE(torch::equal(run.state.batch.at(std::string("labels")),
                                  functional::set_batch_sequence_length(original, 16).at(std::string("labels"))));
       }},
      {"alibi",
       [] {
         // The class at INIT and apply_alibi on the same GPT: the same logits on a sequence longer than it was built
         // for, and the same parameters.
         Run run;
         auto via_class = composer::testing::tiny_gpt(0);
         run.state.model = via_class;
         composer::testing::make_example("alibi")->apply(Event::INIT, run.state, run.logger);
         auto via_fn = composer::testing::tiny_gpt(0);
         EXPECT_EQ(functional::apply_alibi(*via_fn, 64), 2);
         via_class->eval();
         via_fn->eval();
         const at::Tensor ids = torch::randint(0, 17, {2, 48}, at::TensorOptions().dtype(at::kLong));
         const Batch batch({{"input_ids", ids}, {"labels", ids}});
         EXPECT_TRUE(torch::equal(via_class->forward(batch), via_fn->forward(batch)));
         EXPECT_EQ(via_class->named_parameters().keys(), via_fn->named_parameters().keys());
       }},
      {"ema",
       [] {
         // The class at INIT then BATCH_END after a change of the weights, and compute_ema on a copy of the start.
         Run run;
         auto net = tiny_convnet(0);
         run.state.model = ComposerClassifier::wrap(net);
         run.state.timestamp.batch = 1;
         auto algorithm = std::dynamic_pointer_cast<algorithms::EMA>(
             algorithms::make_algorithm("ema", {{"half_life", "4ba"}, {"ema_start", "0ba"}}));
         algorithm->apply(Event::INIT, run.state, run.logger);
         ASSERT_TRUE(algorithm->match(Event::BATCH_END, run.state));  // starts: the average is the weights now
         {
           torch::NoGradGuard no_grad;
           for (auto& p : net->parameters()) p.add_(1.0);
         }
         algorithm->apply(Event::BATCH_END, run.state, run.logger);
         auto start = tiny_convnet(0);
         functional::compute_ema(*net, *start, algorithm->smoothing());
         const auto averaged = start->named_parameters();
         for (const auto& [name, t] : algorithm->ema_model()->named_parameters_dict) {
           EXPECT_TRUE(torch::equal(t, averaged[name.substr(std::string("module.").size())])) << name;
         }
       }},
      {"layer_freezing",
       [] {
         Run run;  // batch 65 of 100: 0.3 of the layers frozen with the defaults
         auto net = tiny_convnet(0);
         run.state.model = ComposerClassifier::wrap(net);
         algorithms::make_algorithm("layer_freezing")->apply(Event::EPOCH_END, run.state, run.logger);
         auto direct = tiny_convnet(0);
         const auto [depth, fraction] = functional::freeze_layers(*direct, nullptr, 0.65);
         EXPECT_GT(depth, 0);
         const auto a = net->parameters(), b = direct->parameters();
         ASSERT_EQ(a.size(), b.size());
         for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].requires_grad(), b[i].requires_grad()) << i;
       }},
      {"low_precision_layernorm",
       [] {
         Run run;
         run.state.precision = Precision::AMP_BF16;
         auto via_class = composer::testing::tiny_gpt(0);
         run.state.model = via_class;
         algorithms::make_algorithm("low_precision_layernorm")->apply(Event::INIT, run.state, run.logger);
         auto via_fn = composer::testing::tiny_gpt(0);
         EXPECT_EQ(functional::apply_low_precision_layernorm(*via_fn, Precision::AMP_BF16).size(), 5u);
         EXPECT_EQ(count_module_instances<nn::LPLayerNorm>(*via_class), 5);
         EXPECT_EQ(count_module_instances<nn::LPLayerNorm>(*via_fn), 5);
         const auto a = via_class->named_parameters(), b = via_fn->named_parameters();
         EXPECT_EQ(a.keys(), b.keys());
         for (const auto& item : a) EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key();
       }},
      {"no_op_model",
       [] {
         // No functional form in Composer either: the class puts a NoOpModelClass of the old model in the state.
         Run run;
         run.state.model = ComposerClassifier::wrap(tiny_convnet(0));
         algorithms::make_algorithm("no_op_model")->apply(Event::INIT, run.state, run.logger);
         auto* stand_in = dynamic_cast<algorithms::NoOpModelClass*>(run.state.model.get());
         ASSERT_NE(stand_in, nullptr);
         algorithms::NoOpModelClass direct(*tiny_convnet(0));
         EXPECT_TRUE(torch::equal(stand_in->forward(run.state.batch), direct.forward(run.state.batch)));
       }},
      {"gated_linear_units",
       [] {
         // The class at INIT and apply_gated_linear_units on the same GPT from the same seed: the same gates.
         Run run;
         auto via_class = composer::testing::tiny_gpt(0);
         run.state.model = via_class;
         torch::manual_seed(3);
         algorithms::make_algorithm("gated_linear_units")->apply(Event::INIT, run.state, run.logger);
         auto via_fn = composer::testing::tiny_gpt(0);
         torch::manual_seed(3);
         EXPECT_EQ(functional::apply_gated_linear_units(*via_fn, nullptr).size(), 2u);
         via_class->eval();
         via_fn->eval();
         const at::Tensor ids = torch::randint(0, 17, {2, 16}, at::TensorOptions().dtype(at::kLong));
         const Batch batch({{"input_ids", ids}, {"labels", ids}});
         EXPECT_TRUE(torch::equal(via_class->forward(batch), via_fn->forward(batch)));
         EXPECT_EQ(via_class->named_parameters().keys(), via_fn->named_parameters().keys());
       }},
      {"gyro_dropout",
       [] {
         // FIT_START on a model with a Dropout, and apply_gyro_dropout with the run's 100 batches: the same layer,
         // and from the same seed the same training outputs.
         auto make = [] {
           torch::manual_seed(0);
           auto seq = std::make_shared<nn::Sequential>();
           seq->push_back(std::make_shared<nn::Linear>(6, 12));
           seq->push_back(std::make_shared<nn::Dropout>(0.5));
           return seq;
         };
         Run run;
         auto via_class = make();
         run.state.model = ComposerClassifier::wrap(via_class);
         run.state.dataloader_len = 10;
         algorithms::make_algorithm("gyro_dropout", {{"sigma", "8"}, {"tau", "2"}})
             ->apply(Event::FIT_START, run.state, run.logger);
         auto via_fn = make();
         EXPECT_EQ(functional::apply_gyro_dropout(*via_fn, 100, 0.5, 8, 2).size(), 1u);
         const at::Tensor x = torch::randn({4, 6});
         torch::manual_seed(8);
         const at::Tensor a = via_class->forward(x);
         torch::manual_seed(8);
         const at::Tensor b = via_fn->forward(x);
         EXPECT_TRUE(torch::equal(a, b));
         EXPECT_EQ(static_cast<nn::GyroDropoutLayer&>(via_class->child("1")).iter_num, 24);  // int(100 / 8) * 2
       }},
      {"low_precision_groupnorm",
       [] {
         auto make = [] {
           torch::manual_seed(0);
           auto seq = std::make_shared<nn::Sequential>();
           seq->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 8, 3).padding(1)));
           seq->push_back(std::make_shared<nn::GroupNorm>(4, 8));
           return seq;
         };
         Run run;
         run.state.precision = Precision::AMP_BF16;
         auto via_class = make();
         run.state.model = ComposerClassifier::wrap(via_class);
         algorithms::make_algorithm("low_precision_groupnorm")->apply(Event::INIT, run.state, run.logger);
         auto via_fn = make();
         EXPECT_EQ(functional::apply_low_precision_groupnorm(*via_fn, Precision::AMP_BF16).size(), 1u);
         EXPECT_EQ(count_module_instances<nn::LPGroupNorm>(*via_class), 1);
         const at::Tensor x = torch::randn({2, 3, 8, 8});
         EXPECT_TRUE(torch::equal(via_class->forward(x), via_fn->forward(x)));
       }},
      {"sam",
       [] {
         // The class at AFTER_LOAD wraps the run's optimizer in the SAMOptimizer one would build by hand.
         Run run;
         auto net = tiny_convnet(0);
         run.state.model = ComposerClassifier::wrap(net);
         auto base = std::make_shared<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1));
         run.state.optimizer = base;
         algorithms::make_algorithm("sam", {{"rho", "0.2"}, {"interval", "3"}})
             ->apply(Event::AFTER_LOAD, run.state, run.logger);
         auto* sam = dynamic_cast<algorithms::SAMOptimizer*>(run.state.optimizer.get());
         ASSERT_NE(sam, nullptr);
         EXPECT_EQ(sam->base_ptr(), base);
         EXPECT_EQ(sam->rho(), 0.2);
         EXPECT_EQ(sam->interval(), 3);
         EXPECT_EQ(&optim::checkpointed_optimizer(*sam), base.get());
       }},
      {"selective_backprop",
       [] {
         // At AFTER_DATALOADER (batch 65 of 100, chosen: 0.65 in [0.5, 0.9), (65 + 1) % 2 != 0 is false -> use 64)
         // the class keeps what select_using_loss keeps from the same seed.
         Run run;
         run.state.timestamp.batch = 64;
         run.state.timestamp.batch_in_epoch = 64;
         auto net = tiny_convnet(0, 4);
         auto model = ComposerClassifier::wrap(net);
         run.state.model = model;
         const Batch original = run.state.batch;
         auto algorithm = algorithms::make_algorithm("selective_backprop");
         ASSERT_TRUE(algorithm->match(Event::AFTER_DATALOADER, run.state));
         torch::manual_seed(4);
         algorithm->apply(Event::AFTER_DATALOADER, run.state, run.logger);
         torch::manual_seed(4);
         const auto [x, y] = functional::select_using_loss(
             original.input(), original.target(),
             [&](const at::Tensor& in) { return model->forward(Batch(in, original.target())); },
             [&](const at::Tensor& out, const at::Tensor& t) {
               return model->per_sample_loss(out, Batch(original.input(), t));
             });
         EXPECT_TRUE(torch::equal(run.state.batch.input(), x));
         EXPECT_TRUE(torch::equal(run.state.batch.target(), y));
         EXPECT_EQ(x.size(0), 4);
       }},
      {"swa",
       [] {
         // SWA at its first two update events (swa_start 0.5dur, every batch) and AveragedWeights fed the same
         // weights: the same average.
         Run run;  // batch 65 of 100
         auto net = tiny_convnet(0);
         run.state.model = ComposerClassifier::wrap(net);
         auto algorithm = std::dynamic_pointer_cast<algorithms::SWA>(
             algorithms::make_algorithm("swa", {{"swa_start", "0.5dur"}, {"update_interval", "1ba"}}));
         algorithm->apply(Event::INIT, run.state, run.logger);
         ASSERT_TRUE(algorithm->match(Event::BATCH_END, run.state));
         auto direct = functional::AveragedWeights::of(*run.state.model);
         for (int k = 0; k < 2; ++k) {
           algorithm->apply(Event::BATCH_END, run.state, run.logger);
           functional::update_averaged_weights(direct, *run.state.model);
           torch::NoGradGuard no_grad;
           for (auto& p : net->parameters()) p.mul_(1.5);
         }
         ASSERT_TRUE(algorithm->swa_model().has_value());
         EXPECT_EQ(algorithm->swa_model()->n_averaged, 2);
         for (const auto& [name, t] : direct.parameters)
           EXPECT_TRUE(torch::equal(algorithm->swa_model()->parameters.at(name), t)) << name;
       }},
      {"label_smoothing",
       [] {
         Run run;
         EXPECT_TRUE(torch::allclose(class_batch("label_smoothing", Event::BEFORE_LOSS, 1),
                                     functional::smooth_labels(run.state.outputs, run.state.batch.target(), 0.1)));
       }},
  };
  return c;
}

class FunctionalAgreement : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(FunctionalAgreement, ClassAndFunctionalFormAgree) {
  auto it = checks().find(GetParam());
  ASSERT_NE(it, checks().end()) << "no agreement check for registered algorithm " << GetParam();
  it->second();
}

INSTANTIATE_TEST_SUITE_P(Registry, FunctionalAgreement, ::testing::ValuesIn(composer::testing::registered_algorithms()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
