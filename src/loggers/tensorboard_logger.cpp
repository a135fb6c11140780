#include "composer/loggers/tensorboard_logger.h"

#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "loggers/detail/event_file_writer.h"
#include "loggers/detail/png_encoder.h"
#include "tensorboard.pb.h"

#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>

namespace composer {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::unique_ptr<tensorboard::Event> summary_event(int64_t step) {
  auto event = std::make_unique<tensorboard::Event>();
  event->set_wall_time(now_seconds());
  event->set_step(step);
  return event;
}

tensorboard::Summary::Value* add_value(tensorboard::Event& event, const std::string& tag) {
  auto* value = event.mutable_summary()->add_value();
  value->set_tag(tag);
  return value;
}

/// images as torch's SummaryWriter shows them: [H, W, 3] (or [H, W, 4] for one RGBA image) uint8, N images tiled
/// eight to a row.
at::Tensor to_hwc_uint8(const at::Tensor& images, const std::string& name) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("TensorboardLogger.log_images '" + name + "': " + why);
  };
  if (!images.defined()) throw bad("the tensor is undefined");
  at::Tensor t = detail::to_uint8_pixels(images, "TensorboardLogger.log_images '" + name + "'");
  const auto channels_ok = [&](int64_t c, bool rgba) {
    if (c != 1 && c != 3 && !(rgba && c == 4))
      throw bad("shape " + c10::str(t.sizes()) + " has " + std::to_string(c) + " channels, expected 1 or 3" +
                (rgba ? " or 4" : ""));
  };
  if (t.dim() == 2) return at::stack({t, t, t}, 2).contiguous();
  if (t.dim() == 3) {
    channels_ok(t.size(0), true);
    t = t.permute({1, 2, 0});
    return (t.size(2) == 1 ? t.expand({t.size(0), t.size(1), 3}) : t).contiguous();
  }
  if (t.dim() != 4) throw bad("shape " + c10::str(t.sizes()) + ", expected [H, W], [C, H, W] or [N, C, H, W]");
  channels_ok(t.size(1), false);
  if (t.size(1) == 1) t = t.expand({t.size(0), 3, t.size(2), t.size(3)});
  const int64_t n = t.size(0), h = t.size(2), w = t.size(3);
  if (n == 0) throw bad("no images (N = 0)");
  const int64_t cols = std::min<int64_t>(n, 8), rows = (n + cols - 1) / cols;
  at::Tensor canvas = at::zeros({3, h * rows, w * cols}, t.options());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = i / cols, x = i % cols;
    canvas.slice(1, y * h, (y + 1) * h).slice(2, x * w, (x + 1) * w).copy_(t[i]);
  }
  return canvas.permute({1, 2, 0}).contiguous();
}

std::string cell(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string markdown_table(const std::vector<std::string>& columns,
                           const std::vector<std::vector<nlohmann::json>>& rows) {
  std::string out = "|";
  for (const auto& c : columns) out += " " + c + " |";
  out += "\n|";
  for (size_t i = 0; i < columns.size(); ++i) out += " --- |";
  for (const auto& row : rows) {
    out += "\n|";
    for (const auto& v : row) out += " " + cell(v) + " |";
  }
  return out;
}

void set_hparams_plugin(tensorboard::Summary::Value& value, const tensorboard::HParamsPluginData& data) {
  auto* plugin = value.mutable_metadata()->mutable_plugin_data();
  plugin->set_plugin_name("hparams");
  plugin->set_content(data.SerializeAsString());
}

}  // namespace

void TensorboardLoggerOptions::validate() const {
  if (log_dir_.empty()) throw std::invalid_argument("TensorboardLogger.log_dir must not be empty");
  if (flush_interval_ <= 0)
    throw std::invalid_argument("TensorboardLogger.flush_interval is " + std::to_string(flush_interval_) +
                                ", expected > 0");
}

TensorboardLogger::TensorboardLogger(TensorboardLoggerOptions options) : options_(std::move(options)) {
  options_.validate();
}

TensorboardLogger::~TensorboardLogger() = default;

bool TensorboardLogger::writes() const { return !options_.rank_zero_only() || dist::get_global_rank() == 0; }

std::string TensorboardLogger::event_file() const { return writer_ ? writer_->path() : std::string(); }

void TensorboardLogger::init(State& state, Logger&) {
  run_name_ = state.run_name;
  run_dir_ = (std::filesystem::path(options_.log_dir()) / run_name_).string();
  initialized_ = true;
  if (!writes()) return;
  writer_ = std::make_unique<detail::EventFileWriter>(run_dir_);
  for (auto& event : pending_) writer_->write(*event);
  pending_.clear();
}

void TensorboardLogger::write(std::unique_ptr<tensorboard::Event> event) {
  if (!writes()) return;
  if (writer_) {
    writer_->write(*event);
  } else if (!initialized_) {
    pending_.push_back(std::move(event));
  }
}

void TensorboardLogger::log_hyperparameters(const nlohmann::json& hparams) {
  if (!writes()) return;
  if (!hparams.is_object())
    throw std::invalid_argument("TensorboardLogger.log_hyperparameters: expected a JSON object of name -> value, got " +
                                std::string(hparams.type_name()));
  for (const auto& [k, v] : hparams.items()) hyperparameters_[k] = format_log_data_value(v);
}

void TensorboardLogger::log_metrics(const std::map<std::string, double>& metrics, int64_t step) {
  if (!writes()) return;
  auto event = summary_event(step);
  for (const auto& [k, v] : metrics) {
    current_metrics_[k] = v;
    add_value(*event, k)->set_simple_value(static_cast<float>(v));
  }
  write(std::move(event));
}

void TensorboardLogger::log_images(const at::Tensor& images, const std::string& name, int64_t step) {
  if (!writes()) return;
  const at::Tensor hwc = to_hwc_uint8(images, name);
  auto event = summary_event(step);
  auto* image = add_value(*event, name)->mutable_image();
  image->set_height(static_cast<int>(hwc.size(0)));
  image->set_width(static_cast<int>(hwc.size(1)));
  image->set_colorspace(static_cast<int>(hwc.size(2)));
  image->set_encoded_image_string(detail::encode_png(hwc));
  write(std::move(event));
}

void TensorboardLogger::log_table(const std::vector<std::string>& columns,
                                  const std::vector<std::vector<nlohmann::json>>& rows, const std::string& name,
                                  int64_t step) {
  if (!writes()) return;
  auto event = summary_event(step);
  auto* value = add_value(*event, name + "/text_summary");
  value->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  auto* tensor = value->mutable_tensor();
  tensor->set_dtype(tensorboard::DT_STRING);
  tensor->mutable_tensor_shape()->add_dim()->set_size(1);
  tensor->add_string_val(markdown_table(columns, rows));
  write(std::move(event));
}

void TensorboardLogger::batch_end(State& state, Logger& logger) {
  if (state.timestamp.batch % options_.flush_interval() == 0) flush(logger);
}

void TensorboardLogger::epoch_end(State&, Logger& logger) { flush(logger); }

void TensorboardLogger::eval_end(State&, Logger& logger) {
  if (!writes()) return;
  std::map<std::string, double> hparam_metrics;
  for (const auto& [k, v] : current_metrics_)
    if (k.find("metric") != std::string::npos || k.find("loss") != std::string::npos)
      hparam_metrics["hparams/" + k] = v;

  tensorboard::HParamsPluginData experiment;
  for (const auto& [k, v] : hyperparameters_) {
    auto* info = experiment.mutable_experiment()->add_hparam_infos();
    info->set_name(k);
    info->set_type(tensorboard::DATA_TYPE_STRING);
  }
  for (const auto& [k, v] : hparam_metrics)
    experiment.mutable_experiment()->add_metric_infos()->mutable_name()->set_tag(k);
  tensorboard::HParamsPluginData start;
  auto& start_hparams = *start.mutable_session_start_info()->mutable_hparams();
  for (const auto& [k, v] : hyperparameters_) start_hparams[k].set_string_value(v);
  tensorboard::HParamsPluginData end;
  end.mutable_session_end_info()->set_status(tensorboard::STATUS_SUCCESS);

  if (!hparams_writer_)
    hparams_writer_ = std::make_unique<detail::EventFileWriter>((std::filesystem::path(run_dir_) / run_name_).string());
  const std::pair<const char*, const tensorboard::HParamsPluginData*> records[] = {
      {"_hparams_/experiment", &experiment},
      {"_hparams_/session_start_info", &start},
      {"_hparams_/session_end_info", &end}};
  for (const auto& [tag, data] : records) {
    auto event = summary_event(0);
    set_hparams_plugin(*add_value(*event, tag), *data);
    hparams_writer_->write(*event);
  }
  auto scalars = summary_event(0);
  for (const auto& [k, v] : hparam_metrics) add_value(*scalars, k)->set_simple_value(static_cast<float>(v));
  if (!hparam_metrics.empty()) hparams_writer_->write(*scalars);
  hparams_writer_->flush();
  flush(logger);
}

void TensorboardLogger::fit_end(State&, Logger& logger) { flush(logger); }

void TensorboardLogger::close(State&, Logger& logger) {
  flush(logger);
  writer_.reset();
  hparams_writer_.reset();
}

void TensorboardLogger::flush(Logger& logger) {
  if (!writer_) return;
  writer_->flush();
  const std::string stem = std::filesystem::path(writer_->path()).stem().string();  // as Composer's Path.stem
  logger.upload_file("tensorboard_logs/{run_name}/" + stem + "-" + std::to_string(dist::get_global_rank()),
                     writer_->path(), /*overwrite=*/true);
}

}  // namespace composer
