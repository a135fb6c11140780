// composer-cpp generate (a config's language model continues a prompt) and export --format hf (a checkpoint's
// Llama-family, GPT-2 or BERT weights as a Hugging Face model directory).
#include "cli/build_run.h"
#include "cli/command_support.h"
#include "cli/commands.h"
#include "composer/composer.h"

#include <filesystem>

namespace composer::cli {
namespace {

// The config's language model, with the weights of its load_path checkpoint when it names one (a fine-tuned run).
std::shared_ptr<ComposerLanguageModel> language_model(const ConfigNode& root) {
  if (!root.has("model")) throw ConfigError("model: required");
  auto model = std::dynamic_pointer_cast<ComposerLanguageModel>(build_model(root.child("model"), DataSpec{}));
  if (!model)
    throw ConfigError("model.name: '" + root.child("model").get_string("name", "") + "' is not a language model");
  const std::string load_path = root.get_string("load_path", "");
  if (!load_path.empty()) {  // the weights only, through the State codec (strict: the config the run was trained with)
    const auto saved = read_checkpoint(load_path).toGenericDict().at("state").toGenericDict();
    if (!saved.contains("model")) throw ConfigError("load_path: '" + load_path + "' holds no model weights");
    c10::impl::GenericDict weights(c10::StringType::get(), c10::AnyType::get());
    weights.insert("model", saved.at("model"));
    State state;
    state.model = model;
    try {
      load_state_dict(state, weights);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("load_path: '" + load_path + "': " + e.what() + " (give the config the run was trained with)");
    }
  }
  return model;
}

// BERT's tokenizer (WordPiece) is not read by the library: an hf_masked_lm's export carries its pretrained
// directory's tokenizer files over as they are, so that the written directory is whole for AutoTokenizer.
void copy_tokenizer_files(const ConfigNode& model, const std::string& output, std::ostream& out) {
  if (model.get_string("name", "") != "hf_masked_lm") return;
  const std::filesystem::path from = model.get_string("pretrained", "");
  int64_t copied = 0;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"}) {
    if (!std::filesystem::is_regular_file(from / name)) continue;
    std::filesystem::copy_file(from / name, std::filesystem::path(output) / name,
                               std::filesystem::copy_options::overwrite_existing);
    ++copied;
  }
  if (copied > 0) out << "composer-cpp: copied " << copied << " tokenizer file(s) from " << from.string() << "\n";
}

}  // namespace

int generate_command(const std::string& config, const std::vector<std::string>& overrides, const GenerateArgs& args,
                     std::ostream& out, std::ostream& err) {
  return run_guarded(err, [&] {
    const ConfigNode root(load_with_overrides(config, overrides), "");
    auto model = language_model(root);
    if (!model->tokenizer()) {
      throw ConfigError("model: has no tokenizer to read the prompt (a pretrained model brings its own)");
    }
    const auto ids = model->tokenizer()->encode(args.prompt);
    if (ids.empty()) throw ConfigError("--prompt: the prompt has no tokens");
    auto options = models::GenerationOptions()
                       .max_new_tokens(args.max_new_tokens)
                       .do_sample(args.sample)
                       .temperature(args.temperature)
                       .top_k(args.top_k)
                       .top_p(args.top_p)
                       .eos_token_id(model->tokenizer()->eos_token());
    try {
      options.validate();
    } catch (const std::invalid_argument& e) {
      throw ConfigError(std::string("generate: ") + e.what());
    }
    at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(args.seed));
    const at::Tensor input = at::tensor(ids, at::kLong).unsqueeze(0);
    const at::Tensor all = models::generate_tokens(model->model(), input, options, gen);
    const at::Tensor fresh = all.select(0, 0).narrow(0, input.size(1), all.size(1) - input.size(1)).contiguous();
    std::vector<int64_t> new_ids(fresh.data_ptr<int64_t>(), fresh.data_ptr<int64_t>() + fresh.numel());
    const auto eos = model->tokenizer()->eos_token();
    if (eos && !new_ids.empty() && new_ids.back() == *eos) new_ids.pop_back();  // the stop token is not text
    out << args.prompt << model->tokenizer()->decode(new_ids) << "\n";
    return 0;
  });
}

int export_hf(const std::string& checkpoint, const std::string& config, const std::string& output, std::ostream& out) {
  if (config.empty()) throw ConfigError("--config: required with --format hf (the run's YAML names the model)");
  if (output.empty()) throw ConfigError("--output: required with --format hf (the model directory to write)");
  YAML::Node root = load_with_overrides(config, {"load_path=" + checkpoint});
  auto model = language_model(ConfigNode(root, ""));
  auto* llama = dynamic_cast<models::Llama*>(&model->model());
  auto* gpt = dynamic_cast<models::GPT*>(&model->model());
  auto* bert = dynamic_cast<models::BertMLM*>(&model->model());
  if (!llama && !gpt && !bert) {
    throw ConfigError(
        "--format hf: the config's model is not a Llama-family model, a GPT-2 or a BERT (llama, gpt, "
        "hf_causal_lm, bert, hf_masked_lm)");
  }
  if (bert) {
    models::save_bert_hf(*bert, output);
    copy_tokenizer_files(ConfigNode(root, "").child("model"), output, out);
  } else if (gpt) {
    models::save_gpt2_hf(*gpt, output);
  } else if (models::has_lora(*llama)) {  // the adapters in PEFT's format, then the model with them merged in
    const std::string adapters = (std::filesystem::path(output) / "adapter").string();
    models::save_lora_adapters(*llama, adapters);
    models::merge_lora(*llama);
    out << "composer-cpp: wrote the LoRA adapters (PEFT's format) to " << adapters << "\n";
  }
  if (llama) models::save_llama_hf(*llama, output);
  if (const auto* tokenizer = dynamic_cast<const BpeTokenizer*>(model->tokenizer().get()))
    tokenizer->save_pretrained(output);  // tokenizer.json and tokenizer_config.json beside the weights
  out << "composer-cpp: wrote a Hugging Face model directory to " << output
      << " (transformers: " << (bert ? "AutoModelForMaskedLM" : "AutoModelForCausalLM") << ".from_pretrained)\n";
  return 0;
}

}  // namespace composer::cli
