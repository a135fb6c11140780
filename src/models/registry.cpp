#include "composer/models/registry.h"

#include "composer/data/bpe_tokenizer.h"
#include "composer/loss/registry.h"
#include "composer/models/gguf_model.h"
#include "composer/models/hf_bert.h"
#include "composer/models/hf_gpt2.h"
#include "composer/models/hf_model.h"
#include "composer/models/initializers.h"
#include "composer/models/language_model.h"
#include "composer/models/llama.h"
#include "composer/models/lora.h"
#include "composer/models/transformer.h"
#include "composer/models/vision.h"
#include "data/detail/pretrained_tokenizer.h"

#include <torch/arg.h>

#include <fstream>
#include <stdexcept>
#include <string>

namespace composer::models {
namespace {

// The CLI names the key: "model.hidden[1] = 0: expected a positive number".
void require_positive(int64_t value, const std::string& field) {
  if (value < 1) {
    throw std::invalid_argument("model." + field + " = " + std::to_string(value) + ": expected a positive number");
  }
}

// What every vision classifier adds to its shape: Composer's `initializers` (names, applied in order) and
// `loss_name` (the loss registry's).
struct ClassifierFields {
  std::vector<std::string> initializers;
  std::string loss_name = "soft_cross_entropy";

  template <class Module>
  std::shared_ptr<ComposerModel> wrap(Module module) const {
    for (size_t i = 0; i < initializers.size(); ++i) {
      try {
        apply_initializer(*module, initializer_from_string(initializers[i]));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("model.initializers[" + std::to_string(i) + "]: " + e.what());
      }
    }
    if (loss_name == "soft_cross_entropy") return ComposerClassifier::wrap(module);  // keeps the per-sample loss
    const LossRegistry& losses = loss_registry();
    if (!losses.find(loss_name))
      throw std::invalid_argument("model.loss_name '" + loss_name + "': expected one of " + losses.names());
    return ComposerClassifier::wrap(module, *losses.make(loss_name, {}, "model.loss_name"));
  }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("initializers", self.initializers, "Composer's Initializer names applied in order (kaiming_normal, ...)");
    visit("loss_name", self.loss_name, "the loss: soft_cross_entropy, binary_cross_entropy_with_logits, dice_loss");
  }
};

struct MLPFields {
  TORCH_ARG(int64_t, in_features) = 784;
  TORCH_ARG(std::vector<int64_t>, hidden) = std::vector<int64_t>{256, 256};
  TORCH_ARG(int64_t, num_classes) = 10;

 public:
  ClassifierFields classifier;

  void follow(const ModelInputs& in) {
    if (in.image_size > 0) in_features_ = in.channels * in.image_size * in.image_size;
    if (in.num_classes > 0) num_classes_ = in.num_classes;
  }
  std::shared_ptr<ComposerModel> build() const {
    require_positive(in_features_, "in_features");
    for (size_t i = 0; i < hidden_.size(); ++i) require_positive(hidden_[i], "hidden[" + std::to_string(i) + "]");
    require_positive(num_classes_, "num_classes");
    return classifier.wrap(mlp(in_features_, hidden_, num_classes_));
  }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("in_features", self.in_features_, "input features (default: the data's channels x size x size)");
    visit("hidden", self.hidden_, "hidden layer widths");
    visit("num_classes", self.num_classes_, "output classes (default: the data's)");
    ClassifierFields::for_each_field(self.classifier, visit);
  }
};

struct MnistCNNFields {
  TORCH_ARG(int64_t, in_channels) = 1;
  TORCH_ARG(int64_t, num_classes) = 10;
  TORCH_ARG(int64_t, width) = 32;

 public:
  ClassifierFields classifier;

  void follow(const ModelInputs& in) {
    if (in.channels > 0) in_channels_ = in.channels;
    if (in.num_classes > 0) num_classes_ = in.num_classes;
  }
  std::shared_ptr<ComposerModel> build() const {
    require_positive(in_channels_, "in_channels");
    require_positive(num_classes_, "num_classes");
    require_positive(width_, "width");
    return classifier.wrap(mnist_cnn(in_channels_, num_classes_, width_));
  }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("in_channels", self.in_channels_, "image channels (default: the data's)");
    visit("num_classes", self.num_classes_, "output classes (default: the data's)");
    visit("width", self.width_, "channels of the first convolution (the second has twice as many)");
    ClassifierFields::for_each_field(self.classifier, visit);
  }
};

// CIFAR-style (depth 6n+2, default 20) or ImageNet-style (18, 34, 50, 101, 152; default 50) ResNets.
template <bool kCifar>
struct ResNetFields {
  TORCH_ARG(int64_t, depth) = kCifar ? 20 : 50;
  TORCH_ARG(int64_t, num_classes) = kCifar ? 10 : 1000;
  TORCH_ARG(int64_t, in_channels) = 3;

 public:
  ClassifierFields classifier;

  void follow(const ModelInputs& in) {
    if (in.channels > 0) in_channels_ = in.channels;
    if (in.num_classes > 0) num_classes_ = in.num_classes;
  }
  std::shared_ptr<ComposerModel> build() const {
    require_positive(num_classes_, "num_classes");
    require_positive(in_channels_, "in_channels");
    return classifier.wrap(kCifar ? cifar_resnet(depth_, num_classes_, in_channels_)
                                  : resnet(depth_, num_classes_, in_channels_));
  }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("depth", self.depth_, kCifar ? "layers: 20, 32, 44, 56 or 110" : "layers: 18, 34, 50, 101 or 152");
    visit("num_classes", self.num_classes_, "output classes (default: the data's)");
    visit("in_channels", self.in_channels_, "image channels (default: the data's)");
    ClassifierFields::for_each_field(self.classifier, visit);
  }
};

// GPT (causal) or BERT (masked LM) over TransformerConfig's fields.
template <bool kMasked>
struct TransformerFields {
  TransformerConfig config;

  void follow(const ModelInputs& in) {
    if (in.vocab_size > 0) config.vocab_size(in.vocab_size);
  }
  std::shared_ptr<ComposerModel> build() const {
    if (kMasked) return std::make_shared<ComposerLanguageModel>(std::make_shared<BertMLM>(config), /*masked=*/true);
    return std::make_shared<ComposerLanguageModel>(std::make_shared<GPT>(config));
  }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("vocab_size", self.config.vocab_size(), "token ids (default: the data's)");
    visit("max_seq_len", self.config.max_seq_len(), "longest sequence (position embeddings)");
    visit("n_layer", self.config.n_layer(), "transformer blocks");
    visit("n_head", self.config.n_head(), "attention heads (must divide d_model)");
    visit("d_model", self.config.d_model(), "embedding width");
    visit("d_ff", self.config.d_ff(), "feed-forward width; 0 is 4 x d_model");
    visit("dropout", self.config.dropout(), "dropout probability");
    visit("activation", self.config.activation(), "feed-forward activation: gelu, or gelu_new (tanh approximation)");
    visit("layer_norm_eps", self.config.layer_norm_eps(), "LayerNorm epsilon of the GPT blocks");
  }
};

// PEFT's LoRA options under `lora:` (lora.r etc. in the field list); r 0: no adapters.
struct LoraFields {
  LoraOptions options = LoraOptions().r(0);

  // Adapts `llama` when r > 0: only the adapters train.
  void apply(Llama& llama) const {
    if (options.r() == 0) return;
    apply_lora(llama, options);
  }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    LoraOptions::for_each_field(self.options, prefixed(visit, "lora."));
  }
};

// A Llama-family decoder from random weights, over LlamaConfig's fields (Hugging Face's names and defaults).
struct LlamaFields {
  LlamaConfig config;
  LoraFields lora;

  void follow(const ModelInputs& in) {
    if (in.vocab_size > 0) config.vocab_size(in.vocab_size);
  }
  std::shared_ptr<ComposerModel> build() const {
    auto llama = std::make_shared<Llama>(config);
    lora.apply(*llama);
    return std::make_shared<ComposerLanguageModel>(llama);
  }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    LlamaConfig::for_each_field(self.config, visit);
    RopeScaling::for_each_field(self.config.rope_scaling(), prefixed(visit, "rope_scaling."));
    LoraFields::for_each_field(self.lora, visit);
  }
};

// Token ids the data holds (ModelInputs::vocab_size) against a pretrained model's vocabulary.
void check_data_vocab(int64_t data_vocab, int64_t vocab) {
  if (data_vocab > vocab) {
    throw std::invalid_argument("model.pretrained: the data's token ids reach " + std::to_string(data_vocab) +
                                ", beyond the model's vocabulary of " + std::to_string(vocab) +
                                " (tokenize the data with the model's tokenizer)");
  }
}

// A pretrained causal LM (Composer's HuggingFaceModel, llm-foundry's hf_causal_lm): a Hugging Face directory or a
// GGUF file, with its own tokenizer.
struct PretrainedFields {
  std::string pretrained;
  LoraFields lora;
  int64_t data_vocab = 0;

  void follow(const ModelInputs& in) { data_vocab = in.vocab_size; }
  std::shared_ptr<ComposerModel> build() const {
    if (pretrained.empty())
      throw std::invalid_argument("model.pretrained: required (a model directory or a .gguf file)");
    const bool gguf = pretrained.size() > 5 && pretrained.compare(pretrained.size() - 5, 5, ".gguf") == 0;
    std::shared_ptr<Llama> llama;
    std::shared_ptr<GPT> gpt;
    std::shared_ptr<const Tokenizer> tokenizer;
    try {
      if (!gguf && hf_model_type(pretrained) == "gpt2") {
        gpt = load_gpt2_hf(pretrained);
      } else {
        llama = gguf ? load_llama_gguf(pretrained) : load_llama_hf(pretrained);
      }
      tokenizer = composer::detail::pretrained_tokenizer(pretrained);  // none for a directory without tokenizer.json
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument("model.pretrained: " + std::string(e.what()));
    }
    check_data_vocab(data_vocab, gpt ? gpt->config().vocab_size() : llama->config().vocab_size());
    if (gpt && lora.options.r() > 0)
      throw std::invalid_argument("model.lora: LoRA adapts the Llama family; '" + pretrained + "' is a GPT-2");
    if (llama) lora.apply(*llama);
    auto model = gpt ? std::make_shared<ComposerLanguageModel>(gpt) : std::make_shared<ComposerLanguageModel>(llama);
    model->set_tokenizer(tokenizer);
    return model;
  }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("pretrained", self.pretrained,
          "a Hugging Face model directory (Llama family or GPT-2; config.json, safetensors) or a .gguf file");
    LoraFields::for_each_field(self.lora, visit);
  }
};

// A pretrained BERT masked LM (Composer's HuggingFaceModel around BertForMaskedLM): a Hugging Face directory.
struct PretrainedMaskedLmFields {
  std::string pretrained;
  int64_t data_vocab = 0;

  void follow(const ModelInputs& in) { data_vocab = in.vocab_size; }
  std::shared_ptr<ComposerModel> build() const {
    if (pretrained.empty()) throw std::invalid_argument("model.pretrained: required (a BERT model directory)");
    std::shared_ptr<BertMLM> bert;
    try {
      bert = load_bert_hf(pretrained);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument("model.pretrained: " + std::string(e.what()));
    }
    check_data_vocab(data_vocab, bert->config().vocab_size());
    return std::make_shared<ComposerLanguageModel>(bert, /*masked=*/true);
  }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("pretrained", self.pretrained,
          "a Hugging Face BERT directory (config.json, safetensors); the data comes in the model's vocabulary");
  }
};

template <class Fields>
ModelRegistry::Entry model(std::string name, std::string class_name, std::string summary) {
  return registry_entry<ComposerModel, const ModelInputs&>(
      std::move(name), std::move(class_name), std::move(summary), Fields(),
      [](Hparams&, const Fields& fields, const ModelInputs&) { return fields.build(); });
}

}  // namespace

const ModelRegistry& model_registry() {
  static const ModelRegistry registry(
      "model", {
                   model<MLPFields>("mlp", "mlp", "multilayer perceptron on flattened images"),
                   model<MnistCNNFields>("mnist_cnn", "mnist_cnn", "2-conv CNN for 28x28 images"),
                   model<ResNetFields<true>>("cifar_resnet", "cifar_resnet", "CIFAR-style ResNet-20/32/44/56/110"),
                   model<ResNetFields<false>>("resnet", "resnet", "ImageNet-style ResNet-18/34/50/101/152"),
                   model<TransformerFields<false>>("gpt", "GPT", "GPT-2-style causal decoder"),
                   model<TransformerFields<true>>("bert", "BertMLM", "BERT-style encoder with a masked-LM head"),
                   model<LlamaFields>("llama", "Llama", "Llama-family decoder (random weights)"),
                   model<PretrainedFields>("hf_causal_lm", "Llama",
                                           "pretrained Llama-family or GPT-2 model from a directory or GGUF"),
                   model<PretrainedMaskedLmFields>("hf_masked_lm", "BertMLM",
                                                   "pretrained BERT masked LM from a Hugging Face directory"),
               });
  return registry;
}

}  // namespace composer::models
