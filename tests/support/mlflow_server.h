// MlflowServer: a real `mlflow server` on loopback for the logger tests, in its own session (it starts worker
// processes), killed with all of them at the end. With `authenticated`, it runs MLflow's basic-auth app (admin user
// "admin", password admin_password()) with tests/support/mlflow_token_auth.py in front, which also takes the bearer
// token token() as the admin.
#pragma once

#include "support/process.h"
#include "support/python.h"

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace composer::testing {

class MlflowServer {
 public:
  explicit MlflowServer(const std::filesystem::path& dir, bool authenticated = false) : port_(unused_port()) {
    namespace fs = std::filesystem;
    fs::create_directories(dir);
    const std::string mlflow = (fs::path(python()).parent_path() / "mlflow").string();
    const std::string log = (dir / "server.log").string();
    const std::string store = "sqlite:///" + (dir / "mlflow.db").string();
    const std::string artifacts = (dir / "artifacts").string();
    std::vector<std::string> argv{mlflow,
                                  "server",
                                  "--host",
                                  "127.0.0.1",
                                  "--port",
                                  std::to_string(port_),
                                  "--backend-store-uri",
                                  store,
                                  "--artifacts-destination",
                                  artifacts,
                                  "--workers",
                                  "1"};
    std::vector<std::string> env;
    if (authenticated) {
      const std::string ini = (dir / "auth.ini").string();
      std::ofstream(ini) << "[mlflow]\ndefault_permission = READ\ndatabase_uri = sqlite:///"
                         << (dir / "auth.db").string()
                         << "\nadmin_username = admin\nadmin_password = " << admin_password()
                         << "\nauthorization_function = mlflow_token_auth:authenticate_request\n";
      argv.insert(argv.begin() + 2, {"--app-name", "basic-auth"});
      env = {"MLFLOW_AUTH_CONFIG_PATH=" + ini, "MLFLOW_FLASK_SERVER_SECRET_KEY=composer-cpp-tests",
             "COMPOSER_TEST_MLFLOW_TOKEN=" + token(), "PYTHONPATH=" + source_dir() + "/tests/support"};
    }
    pid_ = spawn_server(argv, log, env);
  }
  ~MlflowServer() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  MlflowServer(const MlflowServer&) = delete;
  MlflowServer& operator=(const MlflowServer&) = delete;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  static std::string admin_password() { return "composer-cpp-Admin-1"; }
  static std::string token() { return "composer-cpp-test-token"; }

 private:
  int port_;
  pid_t pid_ = -1;
};

}  // namespace composer::testing
