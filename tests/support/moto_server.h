// A real S3 server for tests: moto in server mode (PyPI's moto[server], in the project environment) on loopback,
// with signature checking on (an IAM user and its key are made first), and the standard AWS variables pointed at it
// while the object lives.
#pragma once

#include "support/process.h"
#include "support/python.h"
#include "support/scoped_env.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace composer::testing {

class MotoServer {
 public:
  /// Starts the server and creates `buckets`; AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY point
  /// at it (and AWS_SHARED_CREDENTIALS_FILE at nothing, so no real profile is read).
  MotoServer(std::filesystem::path dir, std::vector<std::string> buckets)
      : dir_(std::move(dir)), buckets_(std::move(buckets)), port_(unused_port()) {
    start();
  }
  ~MotoServer() { stop(); }

  /// Kills the server (SIGKILL): its buckets are gone.
  void stop() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  /// A fresh server on the same port: new credentials (the old key is refused), the buckets made again, empty.
  void restart() {
    stop();
    start();
  }
  /// A fresh server on the same port with no buckets, accepting any key (a server that lost its state).
  void restart_empty() {
    stop();
    launch("1000000000");
    const auto r = run_python({source_dir() + "/tests/storage/moto_s3.py", "wait", url()});
    if (r.status != 0) throw std::runtime_error("moto did not come back: " + r.output);
  }
  /// SIGSTOP / SIGCONT: connections are accepted by the kernel but never answered while paused.
  void pause() { ::kill(-pid_, SIGSTOP); }
  void resume() { ::kill(-pid_, SIGCONT); }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& key_id() const { return key_id_; }
  const std::string& secret() const { return secret_; }
  /// Runs tests/storage/moto_s3.py COMMAND URL ID SECRET args... (boto3, the reference client).
  PythonResult boto(const std::string& command, const std::vector<std::string>& args) const {
    std::vector<std::string> argv{source_dir() + "/tests/storage/moto_s3.py", command, url(), key_id_, secret_};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_python(argv);
  }
  /// The keys under a prefix, listed by boto3.
  std::vector<std::string> list(const std::string& bucket, const std::string& prefix = "") const {
    const auto r = boto("list", {bucket, prefix});
    if (r.status != 0) throw std::runtime_error("boto3 list failed: " + r.output);
    return nlohmann::json::parse(r.output.substr(r.output.rfind('['))).get<std::vector<std::string>>();
  }
  std::string server_log() const { return read_text((dir_ / "moto.log").string()); }

 private:
  void launch(const std::string& unsigned_actions) {
    std::filesystem::create_directories(dir_);
    const std::string moto = (std::filesystem::path(python()).parent_path() / "moto_server").string();
    // The setup script's four IAM calls go unsigned; every request after them must be signed by a known key.
    pid_ = spawn_server({moto, "-H", "127.0.0.1", "-p", std::to_string(port_)}, (dir_ / "moto.log").string(),
                        {"INITIAL_NO_AUTH_ACTION_COUNT=" + unsigned_actions});
  }
  void start() {
    launch("4");
    std::vector<std::string> argv{source_dir() + "/tests/storage/moto_s3.py", "setup", url()};
    argv.insert(argv.end(), buckets_.begin(), buckets_.end());
    const auto r = run_python(argv);
    if (r.status != 0) throw std::runtime_error("moto setup failed: " + r.output + "\n" + server_log());
    const auto key = nlohmann::json::parse(r.output.substr(r.output.rfind('{')));
    key_id_ = key["id"];
    secret_ = key["secret"];
    env_.set("AWS_ENDPOINT_URL", url());
    env_.set("AWS_ACCESS_KEY_ID", key_id_);
    env_.set("AWS_SECRET_ACCESS_KEY", secret_);
    env_.set("AWS_REGION", "us-east-1");
    env_.set("AWS_SHARED_CREDENTIALS_FILE", (dir_ / "no-credentials").string());
  }
  std::filesystem::path dir_;
  std::vector<std::string> buckets_;
  int port_;
  pid_t pid_ = -1;
  std::string key_id_, secret_;
  ScopedEnv env_;
};

}  // namespace composer::testing
