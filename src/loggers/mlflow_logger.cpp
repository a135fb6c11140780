#include "composer/loggers/mlflow_logger.h"

#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "loggers/detail/http_client.h"
#include "loggers/detail/png_encoder.h"

#include <ATen/ATen.h>
#include <fnmatch.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <stdexcept>

namespace composer {

namespace {

const char* kDefaultExperiment = "my-mlflow-experiment";

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool matches_any(const std::string& key, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (::fnmatch(p.c_str(), key.c_str(), 0) == 0) return true;
  return false;
}

/// A param's value as MLflow's log_params writes Python values (str()): strings bare, booleans True/False.
std::string param_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return v.dump();
}

std::string random_hex(size_t n) {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += digits[gen() % 16];
  return s;
}

/// One image of a batch as MLflow's log_image takes it: [H, W, C] uint8, C 1, 3 or 4 (floats are 0..1).
at::Tensor to_mlflow_image(at::Tensor image, const std::string& name) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("MLFlowLogger.log_images '" + name + "': " + why);
  };
  image = image.squeeze();
  if (image.dim() == 2) image = image.unsqueeze(0);
  if (image.dim() != 3) throw bad("an image of shape " + c10::str(image.sizes()) + ", expected [C, H, W] or [H, W]");
  if (image.size(0) != 1 && image.size(0) != 3 && image.size(0) != 4)
    throw bad(std::to_string(image.size(0)) + " channels, expected 1, 3 or 4");
  return detail::to_uint8_pixels(image, "MLFlowLogger.log_images '" + name + "'").permute({1, 2, 0}).contiguous();
}

/// The server could not be reached, or failed (HTTP 5xx after the client's retries): worth trying again later.
struct ServerUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One request; throws ServerUnavailable for an unreachable or failing server (HTTP 5xx), and std::runtime_error for
/// a refusal (3xx/4xx) unless refusal_is_error is false. The error names the request and the server's message.
detail::HttpResponse send(const detail::HttpClient& http, const std::string& method, const std::string& url,
                          const std::string& body = "", const std::string& content_type = "application/json",
                          bool refusal_is_error = true) {
  const auto r = http.request(method, url, body, content_type);
  if (r.status == 0) throw ServerUnavailable("MLFlowLogger: cannot reach " + url + ": " + r.error);
  if (r.status >= 500 || (refusal_is_error && r.status >= 300)) {
    const nlohmann::json answer = nlohmann::json::parse(r.body, nullptr, false);
    const std::string why =
        answer.is_object() && answer.contains("message") ? answer["message"].get<std::string>() : r.body.substr(0, 300);
    std::string what =
        "MLFlowLogger: " + method + " " + url + " answered HTTP " + std::to_string(r.status) + ": " + why;
    if (r.status == 401 || r.status == 403)
      what += " (credentials: MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN)";
    if (r.status >= 500) throw ServerUnavailable(what);
    throw std::runtime_error(what);
  }
  return r;
}

/// The upload URL of `path` in a run whose artifact location is `artifact_uri` (served by the tracking server).
std::string artifact_url(const std::string& tracking_uri, const std::string& artifact_uri, const std::string& path) {
  const std::string scheme = "mlflow-artifacts:";
  if (artifact_uri.rfind(scheme, 0) != 0)
    throw std::runtime_error("MLFlowLogger: the run's artifact location is '" + artifact_uri +
                             "'; uploading needs a server that serves artifacts (mlflow server without "
                             "--no-serve-artifacts)");
  std::string root = artifact_uri.substr(scheme.size());
  while (!root.empty() && root.front() == '/') root.erase(0, 1);
  std::string escaped;
  for (size_t start = 0; start <= path.size();) {
    const size_t slash = std::min(path.find('/', start), path.size());
    escaped += (escaped.empty() ? "" : "/") + detail::HttpClient::escape(path.substr(start, slash - start));
    start = slash + 1;
  }
  return tracking_uri + "/api/2.0/mlflow-artifacts/artifacts/" + root + "/" + escaped;
}

}  // namespace

void MLFlowLoggerOptions::validate() const {
  if (flush_interval_ < 0)
    throw std::invalid_argument("MLFlowLogger.flush_interval is " + std::to_string(flush_interval_) +
                                ", expected seconds >= 0");
  if (log_duplicated_metric_every_n_steps_ < 0)
    throw std::invalid_argument("MLFlowLogger.log_duplicated_metric_every_n_steps is " +
                                std::to_string(log_duplicated_metric_every_n_steps_) + ", expected >= 0");
}

MLFlowLogger::MLFlowLogger(MLFlowLoggerOptions options)
    : options_(std::move(options)), enabled_(!options_.rank_zero_only() || dist::get_global_rank() == 0) {
  options_.validate();
  tracking_uri_ = options_.tracking_uri().empty() ? env_or("MLFLOW_TRACKING_URI", "") : options_.tracking_uri();
  if (!enabled_) return;
  if (tracking_uri_.empty())
    throw std::invalid_argument(
        "MLFlowLogger.tracking_uri is empty and MLFLOW_TRACKING_URI is unset; expected http(s)://host:port of an "
        "MLflow tracking server");
  if (tracking_uri_.rfind("http://", 0) != 0 && tracking_uri_.rfind("https://", 0) != 0)
    throw std::invalid_argument("MLFlowLogger.tracking_uri '" + tracking_uri_ +
                                "': expected http(s)://host:port of an MLflow tracking server (`mlflow server`); "
                                "local file stores are not supported");
  while (!tracking_uri_.empty() && tracking_uri_.back() == '/') tracking_uri_.pop_back();
  // Credentials as MLflow's client reads them: user name and password (basic authentication), else a token.
  http_ = std::make_unique<detail::HttpClient>(
      30.0, 3,
      detail::HttpAuth{env_or("MLFLOW_TRACKING_TOKEN", ""), env_or("MLFLOW_TRACKING_USERNAME", ""),
                       env_or("MLFLOW_TRACKING_PASSWORD", "")});
  last_flush_ = std::chrono::steady_clock::now();
}

MLFlowLogger::~MLFlowLogger() = default;

nlohmann::json MLFlowLogger::call(const std::string& method, const std::string& endpoint, const nlohmann::json& body) {
  const auto r =
      send(*http_, method, tracking_uri_ + "/api/2.0/mlflow/" + endpoint, method == "GET" ? "" : body.dump());
  const nlohmann::json answer = nlohmann::json::parse(r.body.empty() ? "{}" : r.body, nullptr, false);
  return answer.is_discarded() ? nlohmann::json::object() : answer;
}

void MLFlowLogger::init(State& state, Logger&) {
  run_name_ = options_.run_name().empty() ? state.run_name : options_.run_name();
  tags_ = options_.tags();
  tags_["run_name"] = env_or("RUN_NAME", state.run_name);
  if (!options_.run_group().empty()) tags_["run_group"] = options_.run_group();
  if (!options_.rank_zero_only()) run_name_ += "-rank" + std::to_string(dist::get_global_rank());
  if (enabled_) start_run();
}

void MLFlowLogger::start_run() {
  experiment_name_ = options_.experiment_name().empty() ? env_or("MLFLOW_EXPERIMENT_NAME", kDefaultExperiment)
                                                        : options_.experiment_name();
  experiment_id_ = env_or("MLFLOW_EXPERIMENT_ID", "");
  if (experiment_id_.empty()) {
    const auto r = send(*http_, "GET",
                        tracking_uri_ + "/api/2.0/mlflow/experiments/get-by-name?experiment_name=" +
                            detail::HttpClient::escape(experiment_name_),
                        "", "application/json", /*refusal_is_error=*/false);
    if (r.status == 200) {
      experiment_id_ = nlohmann::json::parse(r.body)["experiment"]["experiment_id"].get<std::string>();
    } else {
      experiment_id_ = call("POST", "experiments/create", {{"name", experiment_name_}})["experiment_id"];
    }
  }
  run_id_ = env_or("MLFLOW_RUN_ID", "");
  nlohmann::json run;
  if (run_id_.empty() && options_.resume()) {
    const auto found = call("POST", "runs/search",
                            {{"experiment_ids", {experiment_id_}},
                             {"filter", "tags.run_name = \"" + tags_["run_name"] + "\""},
                             {"max_results", 1}});
    if (found.contains("runs") && !found["runs"].empty()) run = found["runs"][0];
  } else if (!run_id_.empty()) {
    run = call("GET", "runs/get?run_id=" + detail::HttpClient::escape(run_id_), {})["run"];
  }
  if (run.is_null())
    run = call("POST", "runs/create",
               {{"experiment_id", experiment_id_}, {"run_name", run_name_}, {"start_time", now_ms()}})["run"];
  run_id_ = run["info"]["run_id"].get<std::string>();
  artifact_uri_ = run["info"].value("artifact_uri", "");
  // A new or reopened run is RUNNING, with this run's tags.
  call("POST", "runs/update", {{"run_id", run_id_}, {"status", "RUNNING"}});
  nlohmann::json tags = nlohmann::json::array();
  for (const auto& [k, v] : tags_) tags.push_back({{"key", k}, {"value", v}});
  call("POST", "runs/log-batch", {{"run_id", run_id_}, {"tags", tags}});
}

void MLFlowLogger::after_load(State&, Logger& logger) {
  if (enabled_) logger.log_hyperparameters({{"mlflow_experiment_id", experiment_id_}, {"mlflow_run_id", run_id_}});
}

void MLFlowLogger::fit_start(State&, Logger&) { fit_started_ = true; }

void MLFlowLogger::log_hyperparameters(const nlohmann::json& hparams) {
  if (!enabled_ || !hparams.is_object()) return;
  for (const auto& [k, v] : hparams.items())
    if (!matches_any(k, options_.ignore_hyperparameters()))
      pending_params_.push_back({{"key", k}, {"value", param_text(v)}});
}

void MLFlowLogger::log_metrics(const std::map<std::string, double>& metrics, int64_t step) {
  if (!enabled_) return;
  const int64_t ts = now_ms();
  for (const auto& [k, v] : metrics) {
    if (matches_any(k, options_.ignore_metrics())) continue;
    auto it = metrics_cache_.find(k);
    if (it != metrics_cache_.end() && it->second.first == v &&
        step < it->second.second + options_.log_duplicated_metric_every_n_steps())
      continue;
    metrics_cache_[k] = {v, step};
    auto renamed = options_.rename_metrics().find(k);
    const std::string key = renamed == options_.rename_metrics().end() ? k : renamed->second;
    pending_metrics_.push_back({{"key", key}, {"value", v}, {"timestamp", ts}, {"step", step}});
  }
}

void MLFlowLogger::flush() {
  if (!enabled_ || run_id_.empty()) return;
  last_flush_ = std::chrono::steady_clock::now();
  // MLflow's log-batch limits: 1000 metrics and 100 params per request.
  while (!pending_params_.empty() || !pending_metrics_.empty()) {
    nlohmann::json params = nlohmann::json::array(), metrics = nlohmann::json::array();
    size_t np = std::min<size_t>(pending_params_.size(), 100), nm = std::min<size_t>(pending_metrics_.size(), 1000);
    for (size_t i = 0; i < np; ++i) params.push_back(pending_params_[i]);
    for (size_t i = 0; i < nm; ++i) metrics.push_back(pending_metrics_[i]);
    try {
      call("POST", "runs/log-batch", {{"run_id", run_id_}, {"params", params}, {"metrics", metrics}});
    } catch (const ServerUnavailable& e) {  // retried at the next send; a refusal (4xx) is the caller's error
      std::cerr << "composer: " << e.what() << " (kept " << pending_metrics_.size() << " metrics for the next send)\n";
      return;
    }
    pending_params_.erase(pending_params_.begin(), pending_params_.begin() + static_cast<std::ptrdiff_t>(np));
    pending_metrics_.erase(pending_metrics_.begin(), pending_metrics_.begin() + static_cast<std::ptrdiff_t>(nm));
  }
}

void MLFlowLogger::batch_end(State&, Logger&) {
  if (std::chrono::steady_clock::now() - last_flush_ >= std::chrono::seconds(options_.flush_interval())) flush();
}
void MLFlowLogger::epoch_end(State&, Logger&) { flush(); }
void MLFlowLogger::eval_end(State&, Logger&) { flush(); }
void MLFlowLogger::fit_end(State&, Logger&) {
  fit_ended_ = true;
  flush();
}

void MLFlowLogger::post_close() {
  if (!enabled_ || run_id_.empty()) return;
  const bool failed = std::uncaught_exceptions() > 0 || (fit_started_ && !fit_ended_);
  try {
    flush();
  } catch (const std::exception& e) {
    std::cerr << "composer: MLFlowLogger could not send its last metrics: " << e.what() << "\n";
  }
  call("POST", "runs/update",
       {{"run_id", run_id_}, {"status", failed ? "FAILED" : "FINISHED"}, {"end_time", now_ms()}});
}

void MLFlowLogger::put_artifact(const std::string& path, const std::string& local_file) {
  const std::string url = artifact_url(tracking_uri_, artifact_uri_, path);
  const auto r = http_->put_file(url, local_file);
  if (r.status == 0) throw ServerUnavailable("MLFlowLogger: cannot reach " + url + ": " + r.error);
  if (r.status >= 300)
    throw std::runtime_error("MLFlowLogger: PUT " + url + " answered HTTP " + std::to_string(r.status) + ": " +
                             r.body.substr(0, 300));
}

void MLFlowLogger::put_artifact_bytes(const std::string& path, const std::string& bytes) {
  send(*http_, "PUT", artifact_url(tracking_uri_, artifact_uri_, path), bytes, "application/octet-stream");
}

void MLFlowLogger::upload_file(const std::string& remote_file_name, const std::string& file_path, bool) {
  if (enabled_) put_artifact(remote_file_name, file_path);
}

void MLFlowLogger::log_table(const std::vector<std::string>& columns,
                             const std::vector<std::vector<nlohmann::json>>& rows, const std::string& name, int64_t) {
  if (!enabled_) return;
  put_artifact_bytes(name + ".json", nlohmann::json{{"columns", columns}, {"data", rows}}.dump());
  call("POST", "runs/log-batch",
       {{"run_id", run_id_},
        {"tags",
         {{{"key", "mlflow.loggedArtifacts"},
           {"value", nlohmann::json::array({{{"path", name + ".json"}, {"type", "table"}}}).dump()}}}}});
}

void MLFlowLogger::log_images(const at::Tensor& images, const std::string& name, int64_t step) {
  if (!enabled_) return;
  if (!images.defined() || images.numel() == 0)
    throw std::invalid_argument("MLFlowLogger.log_images '" + name + "': no image (an empty or undefined tensor)");
  const std::vector<at::Tensor> list = images.dim() <= 3 ? std::vector<at::Tensor>{images} : images.unbind(0);
  std::string key_base = name;
  for (auto& c : key_base)
    if (c == '/') c = '~';
  for (size_t i = 0; i < list.size(); ++i) {
    const at::Tensor hwc = to_mlflow_image(list[i], name);
    const std::string png = detail::encode_png(hwc);
    const std::string file = "images/" + key_base + "_" + std::to_string(i) + "+step+" + std::to_string(step) +
                             "+timestamp+" + std::to_string(now_ms()) + "+" + random_hex(32) + ".png";
    put_artifact_bytes(file, png);
  }
  call("POST", "runs/log-batch",
       {{"run_id", run_id_}, {"tags", {{{"key", "mlflow.loggedImages"}, {"value", "True"}}}}});
}

}  // namespace composer
