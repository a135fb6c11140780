#include "composer/checkpoint/state_file.h"

#include "composer/core/serialization.h"
#include "composer/core/state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>

namespace composer {
namespace {

std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " '" + path + "': " + std::strerror(errno));
}

}  // namespace

void write_file_atomically(const std::string& path, const std::vector<char>& bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::create_directories(dir);
  const std::string tmp = (dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw io_error("cannot create", tmp);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const auto err = io_error("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw err;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const auto err = io_error("cannot fsync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    throw err;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const auto err = io_error("cannot rename onto", path);
    ::unlink(tmp.c_str());
    throw err;
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void save_state_file(const State& state, const std::string& path) {
  Dict rank_rng = new_dict();
  rank_rng.insert("torch", at::detail::getDefaultCPUGenerator().get_state());
  c10::impl::GenericList rng(c10::AnyType::get());
  rng.push_back(rank_rng);
  Dict payload = new_dict();
  payload.insert("state", state.state_dict());
  payload.insert("rng", rng);
  write_file_atomically(path, torch::pickle_save(payload));
}

void load_state_file(State& state, const std::string& path, bool strict_model) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("state file '" + path + "' cannot be opened");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue payload;
  try {
    payload = torch::pickle_load(bytes);
  } catch (const c10::Error& e) {
    throw std::runtime_error("state file '" + path + "' is corrupt or truncated (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (!payload.isGenericDict() || !payload.toGenericDict().contains("state")) {
    throw std::runtime_error("state file '" + path + "' is not a Composer state file (no 'state' entry)");
  }
  try {
    state.load_state_dict(payload.toGenericDict().at("state"), strict_model);
  } catch (const std::exception& e) {
    throw std::runtime_error("state file '" + path + "': " + e.what());
  }
  const Dict d = payload.toGenericDict();
  if (d.contains("rng")) {
    const auto rng = d.at("rng").toList();
    if (rng.size() > 0) {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(rng.get(0).toGenericDict().at("torch").toTensor());
    }
  }
}

}  // namespace composer
