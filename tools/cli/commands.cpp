#include "cli/commands.h"

#include "cli/build_run.h"
#include "cli/command_support.h"
#include "cli/registry.h"
#include "composer/composer.h"
#include "composer/formats/safetensors.h"

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <sstream>

namespace composer::cli {
namespace {

void print_eval_metrics(const State& s, std::ostream& out) {
  for (const auto& [label, metrics] : s.eval_metrics)
    for (const auto& [name, value] : s.eval_metric_values)
      if (metrics.count(name))
        out << "  metrics/" << label << "/" << name << " = " << std::setprecision(6) << value << "\n";
}

// A metadata value as Python prints it: strings bare at the top, numbers, lists and dicts (Composer's
// composer_env_info is a dict).
std::string value_text(const c10::IValue& v, bool nested = false) {
  if (v.isString()) return nested ? "'" + v.toStringRef() + "'" : v.toStringRef();
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) {
    std::ostringstream s;
    s << v.toDouble();
    return s.str();
  }
  if (v.isNone()) return "None";
  std::string out;
  if (v.isList()) {
    for (const auto& item : v.toList()) out += (out.empty() ? "" : ", ") + value_text(item.get(), true);
    return "[" + out + "]";
  }
  if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict())
      out += (out.empty() ? "" : ", ") + value_text(e.key(), true) + ": " + value_text(e.value(), true);
    return "{" + out + "}";
  }
  return "<" + v.tagKind() + ">";
}

}  // namespace

int train_command(const std::string& config, const std::vector<std::string>& overrides, std::ostream& out_stream,
                  std::ostream& err) {
  return run_guarded(err, [&] {
    RunSpec spec = build_run(load_with_overrides(config, overrides), /*need_train_data=*/true);
    Trainer trainer(std::move(*spec.options));
    State& s = trainer.state();
    const auto start = std::chrono::steady_clock::now();
    trainer.fit();
    std::ostringstream discard;
    std::ostream& out = dist::get_global_rank() == 0 ? out_stream : discard;  // only rank 0 reports
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out << "composer-cpp: trained run '" << s.run_name << "' to " << s.timestamp.get(s.max_duration->unit()).to_string()
        << " (" << s.timestamp.batch << " batches) in " << std::fixed << std::setprecision(1) << secs << " s\n";
    out << std::defaultfloat << std::setprecision(6);
    out << "  loss/train/total = " << s.total_loss_dict["loss/train/total"] << "\n";
    print_eval_metrics(s, out);
    for (const auto& p : spec.log_file_patterns) out << "  logs: " << format_name_with_dist(p, s.run_name) << "\n";
    for (const auto& cb : s.callbacks) {
      const auto* saver = dynamic_cast<const CheckpointSaver*>(cb.get());
      if (saver && saver->remote_uploader()) {
        out << "  checkpoints: " << saver->remote_uploader()->get_uri(saver->remote_folder(s)) << "/\n";
      } else if (saver && !saver->saved_checkpoints().empty()) {
        out << "  checkpoint: " << saver->saved_checkpoints().back()
            << " (composer-cpp eval CONFIG load_path=... to evaluate it)\n";
      }
    }
    trainer.close();
    if (s.nonfinite_loss_batch) {
      err << "composer-cpp: error: run '" << s.run_name << "' diverged: the training loss was not finite from batch "
          << *s.nonfinite_loss_batch << " on (last loss " << s.total_loss_dict["loss/train/total"]
          << "; its weights are not usable; lower the lr or weight decay, or check the precision)\n";
      return 3;
    }
    return 0;
  });
}

int convert_command(const std::string& config, const std::string& out_dir, const std::string& split,
                    const std::string& compression, std::ostream& out, std::ostream& err) {
  return run_guarded(err, [&]() -> int {
    if (split != "train" && split != "test") throw ConfigError("--split '" + split + "': expected train or test");
    const ConfigNode root(load_with_overrides(config, {}), "");
    const std::string section = split == "train" ? "train_data" : "eval_data";
    if (!root.has(section)) throw ConfigError(section + ": required to convert the " + split + " split");
    const DataSpec data = build_data(root.child(section), split == "train", 42);
    const auto* loader = dynamic_cast<const DatasetLoader*>(data.loader.get());
    if (!loader) throw ConfigError(section + ": this data set has no samples to convert");
#if COMPOSER_WITH_STREAMING
    const int64_t shards = write_mds(loader->dataset(), out_dir, MdsWriterOptions().compression(compression));
    out << "composer-cpp: wrote " << loader->dataset().size() << " samples in " << shards << " MDS shard(s) to "
        << out_dir << "\n";
    return 0;
#else
    (void)loader;
    (void)compression;
    throw ConfigError("convert: this build has no MDS support (COMPOSER_WITH_STREAMING=OFF)");
#endif
  });
}

int eval_command(const std::string& config, const std::vector<std::string>& overrides, std::ostream& out,
                 std::ostream& err) {
  return run_guarded(err, [&] {
    RunSpec spec = build_run(load_with_overrides(config, overrides), /*need_train_data=*/false);
    if (!spec.eval.loader) throw ConfigError("eval_data: required to evaluate");
    const std::string load_path = spec.options->load_path();
    if (load_path.empty()) throw ConfigError("load_path: required to evaluate (a checkpoint written by train)");
    spec.options->train_dataloader(nullptr).save_folder("").autoresume(false);
    Trainer trainer(std::move(*spec.options));
    trainer.eval();
    out << "composer-cpp: evaluated '" << load_path << "' (trained " << trainer.state().timestamp.batch
        << " batches)\n";
    print_eval_metrics(trainer.state(), out);
    trainer.close();
    return 0;
  });
}

int inspect_command(const std::string& checkpoint, std::ostream& out, std::ostream& err) {
  return run_guarded(err, [&] {
    const StateSummary s = summarize_state(read_checkpoint(checkpoint).toGenericDict().at("state"));
    out << "checkpoint: " << checkpoint << "\n";
    if (s.run_name) out << "run_name: " << *s.run_name << "\n";
    if (!s.timestamp.empty()) {
      out << "timestamp:";
      for (const auto& [key, value] : s.timestamp)
        out << " " << key << "=" << (value.isInt() ? std::to_string(value.toInt()) : std::to_string(value.toDouble()));
      out << "\n";
    }
    if (!s.metadata.empty()) {
      out << "metadata:\n";
      for (const auto& [key, value] : s.metadata) out << "  " << key << ": " << value_text(value) << "\n";
    }
    if (s.algorithms) {
      out << "algorithms:" << (s.algorithms->empty() ? " (none)" : "") << "\n";
      for (const auto& repr : *s.algorithms) out << "  " << repr << "\n";
    }
    if (s.optimizers) {
      out << "optimizers:";
      for (const auto& name : *s.optimizers) out << " " << name;
      out << "\n";
    }
    out << "model tensors:\n";
    for (const auto& t : s.model) {
      std::ostringstream shape;
      shape << c10::IntArrayRef(t.shape);
      out << "  " << std::left << std::setw(40) << t.name << " " << std::setw(18) << shape.str() << " "
          << c10::toString(t.dtype) << "\n";
    }
    out << "total model elements: " << s.model_elements() << "\n";
    return 0;
  });
}

int export_command(const std::string& checkpoint, const std::string& format, const std::string& output,
                   const std::string& config, std::ostream& out, std::ostream& err) {
  return run_guarded(err, [&] {
    if (format == "hf") return export_hf(checkpoint, config, output, out);
    if (format != "safetensors")
      throw ConfigError("--format: unknown format '" + format + "'; supported: safetensors, hf");
    const Dict state = read_checkpoint(checkpoint).toGenericDict().at("state").toGenericDict();
    NamedTensors tensors;
    for (const auto& e : state.at("model").toGenericDict())
      tensors.emplace_back(e.key().toStringRef(), e.value().toTensor());
    std::map<std::string, std::string> meta{{"format", "pt"}, {"source", "composer-cpp"}};
    if (state.contains("run_name")) meta["run_name"] = state.at("run_name").toStringRef();
    const std::string path =
        output.empty() ? std::filesystem::path(checkpoint).replace_extension(".safetensors").string() : output;
    write_safetensors(path, tensors, meta);
    out << "composer-cpp: wrote " << tensors.size() << " tensors to " << path << "\n";
    return 0;
  });
}

int list_command(const std::string& kind, std::ostream& out, std::ostream& err) {
  return run_guarded(err, [&] {
    const auto& entries = registry(kind);
    if (entries.empty()) out << "(no " << kind << " registered yet)\n";
    size_t width = 0;
    for (const auto& e : entries) width = std::max(width, e.name.size());
    for (const auto& e : entries)
      out << std::left << std::setw(static_cast<int>(width) + 2) << e.name << e.summary << "\n";
    return 0;
  });
}

}  // namespace composer::cli
