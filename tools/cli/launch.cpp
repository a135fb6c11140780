#include "cli/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

namespace composer::cli {
namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("launch: could not find a free port");
  }
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

struct Rank {
  int rank = 0;
  pid_t pid = -1;  // from fork(), > 0
  int out = -1;
  std::string buffer;
  bool running = true;
  int status = 0;
};

void flush_lines(Rank& r, std::ostream& out, bool all) {
  for (auto nl = r.buffer.find('\n'); nl != std::string::npos; nl = r.buffer.find('\n')) {
    out << "[rank " << r.rank << "] " << r.buffer.substr(0, nl) << "\n";
    r.buffer.erase(0, nl + 1);
  }
  if (all && !r.buffer.empty()) {
    out << "[rank " << r.rank << "] " << r.buffer << "\n";
    r.buffer.clear();
  }
  out.flush();
}

// Reads what is available from every rank for up to `ms` milliseconds.
void pump(std::vector<Rank>& ranks, std::ostream& out, int ms) {
  std::vector<pollfd> fds;
  for (auto& r : ranks)
    if (r.out >= 0) fds.push_back({r.out, POLLIN, 0});
  if (fds.empty()) {
    ::usleep(static_cast<useconds_t>(ms) * 1000);
    return;
  }
  if (::poll(fds.data(), fds.size(), ms) <= 0) return;
  for (auto& r : ranks) {
    if (r.out < 0) continue;
    for (const auto& p : fds) {
      if (p.fd != r.out || !(p.revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      const ssize_t n = ::read(r.out, buf, sizeof(buf));
      if (n > 0) {
        r.buffer.append(buf, static_cast<size_t>(n));
        flush_lines(r, out, false);
      } else {
        flush_lines(r, out, true);
        ::close(r.out);
        r.out = -1;
      }
    }
  }
}

volatile sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int signo) { g_stop_signal = signo; }

// SIGTERM, SIGINT and SIGHUP to the launcher are passed on to the ranks (then SIGKILL after the grace period).
struct StopSignals {
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &old[i]);
  }
  ~StopSignals() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old[i], nullptr);
  }
  static constexpr int kSignals[3] = {SIGTERM, SIGINT, SIGHUP};
  struct sigaction old[3];
};

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// More local ranks than this is a typo, not a machine: each rank is a process with a pipe to the launcher.
constexpr int kMaxLocalRanks = 1024;

struct RankEnv {
  int world;
  int port;
  pid_t launcher;
  sigset_t mask;  // the launcher's signal mask, which the ranks start with
};

// The forked child: the distributed environment, the output pipe, then the program. Never returns.
[[noreturn]] void run_rank(const LaunchOptions& o, const RankEnv& e, int local, int rank, int fds[2],
                           std::vector<std::string> argv) {
  // A rank outlives no launcher: killed with SIGKILL too, the launcher takes its ranks with it.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != e.launcher) ::_exit(143);
  // The stop signals were blocked across fork(): a SIGTERM sent before the default actions are back stays pending
  // and ends the rank here, instead of reaching the launcher's handler copied into this process.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : StopSignals::kSignals) ::sigaction(sig, &dfl, nullptr);
  ::sigprocmask(SIG_SETMASK, &e.mask, nullptr);
  ::dup2(fds[1], STDOUT_FILENO);
  ::dup2(fds[1], STDERR_FILENO);
  ::close(fds[0]);
  ::close(fds[1]);
  const std::map<std::string, std::string> env{{"RANK", std::to_string(rank)},
                                               {"WORLD_SIZE", std::to_string(e.world)},
                                               {"LOCAL_RANK", std::to_string(local)},
                                               {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
                                               {"NODE_RANK", std::to_string(o.node_rank)},
                                               {"MASTER_ADDR", o.master_addr},
                                               {"MASTER_PORT", std::to_string(e.port)}};
  for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
  if (!o.node_addr.empty()) ::setenv("COMPOSER_NODE_ADDR", o.node_addr.c_str(), 1);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::fprintf(stderr, "composer-cpp launch: cannot run '%s': %s\n", args[0], std::strerror(errno));
  ::_exit(127);
}

// Forks the node's ranks. Returns an empty string, or why a rank could not be started (then `ranks` holds only the
// ranks that did start, each with a pid this launcher got from fork()).
std::string start_ranks(const LaunchOptions& o, const RankEnv& e, const std::vector<std::string>& argv,
                        std::vector<Rank>& ranks) {
  for (int local = 0; local < o.nproc; ++local) {
    const int rank = o.node_rank * o.nproc + local;
    const std::string which = "rank " + std::to_string(rank) + " of " + std::to_string(e.world);
    int fds[2];
    if (::pipe(fds) != 0) return "cannot start " + which + ": pipe: " + std::strerror(errno);
    sigset_t stop;
    sigemptyset(&stop);
    for (int sig : StopSignals::kSignals) sigaddset(&stop, sig);
    ::sigprocmask(SIG_BLOCK, &stop, nullptr);
    const pid_t pid = ::fork();
    const int error = errno;
    if (pid != 0) ::sigprocmask(SIG_SETMASK, &e.mask, nullptr);
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      return "cannot start " + which + ": fork: " + std::strerror(error);
    }
    if (pid == 0) run_rank(o, e, local, rank, fds, argv);
    ::close(fds[1]);
    Rank r;
    r.rank = rank;
    r.pid = pid;
    r.out = fds[0];
    ranks.push_back(std::move(r));
  }
  return "";
}

struct Outcome {
  int failed_rank = -1;
  int failed_code = 0;
  int forwarded = 0;
};

// Relays the ranks' output until all have ended. The first failing rank (or a stop signal, or `stop_now`) stops the
// others: SIGTERM, then SIGKILL after the grace period. Only pids from fork() are signalled or waited for.
Outcome supervise(std::vector<Rank>& ranks, const LaunchOptions& o, bool stop_now, std::ostream& out,
                  std::ostream& err) {
  Outcome res;
  std::chrono::steady_clock::time_point kill_at{};
  bool stopping = false;
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(o.grace_seconds * 1000));
  auto stop_ranks = [&] {
    for (auto& r : ranks)
      if (r.running && r.pid > 0) ::kill(r.pid, SIGTERM);
    kill_at = std::chrono::steady_clock::now() + grace;
    stopping = true;
  };
  if (stop_now) stop_ranks();
  const auto busy = [&] {
    return std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.running || r.out >= 0; });
  };
  while (busy()) {
    pump(ranks, out, 50);
    if (g_stop_signal != 0 && res.forwarded == 0) {
      res.forwarded = g_stop_signal;
      err << "composer-cpp launch: got " << ::strsignal(res.forwarded) << "; stopping the ranks\n";
      stop_ranks();
    }
    for (auto& r : ranks) {
      int st = 0;
      if (!r.running || r.pid <= 0 || ::waitpid(r.pid, &st, WNOHANG) != r.pid) continue;
      r.running = false;
      r.status = st;
      if (exit_code(st) != 0 && res.failed_rank < 0 && res.forwarded == 0 && !stop_now) {
        res.failed_rank = r.rank;
        res.failed_code = exit_code(st);
        err << "composer-cpp launch: rank " << r.rank << " failed with exit code " << res.failed_code
            << "; stopping the other ranks\n";
        stop_ranks();
      }
    }
    if (stopping && std::chrono::steady_clock::now() >= kill_at) {
      for (auto& r : ranks)
        if (r.running && r.pid > 0) ::kill(r.pid, SIGKILL);
    }
  }
  return res;
}

}  // namespace

int launch_command(const LaunchOptions& o, std::ostream& out, std::ostream& err) {
  if (o.nproc < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
    err << "composer-cpp launch: need -n >= 1, --nnodes >= 1 and 0 <= --node-rank < --nnodes\n";
    return 2;
  }
  if (o.nproc > kMaxLocalRanks) {
    err << "composer-cpp launch: -n " << o.nproc << " is more ranks than one node runs; expected at most "
        << kMaxLocalRanks << " (ranks per node, usually one per GPU or a few per CPU socket)\n";
    return 2;
  }
  if (o.command.empty()) {
    err << "composer-cpp launch: no program given (composer-cpp launch -n N -- PROGRAM ARGS...)\n";
    return 2;
  }
  if (o.nnodes > 1 && o.master_port == 0) {
    err << "composer-cpp launch: several nodes need --master-addr and --master-port\n";
    return 2;
  }
  RankEnv env{o.nproc * o.nnodes, o.master_port > 0 ? o.master_port : free_port(), ::getpid(), {}};
  ::sigprocmask(SIG_SETMASK, nullptr, &env.mask);
  std::vector<std::string> argv = o.command;
  if (argv[0] == "train" || argv[0] == "eval") argv.insert(argv.begin(), "/proc/self/exe");
  std::vector<Rank> ranks;
  ranks.reserve(static_cast<size_t>(o.nproc));
  const StopSignals stop_signals;
  const std::string start_error = start_ranks(o, env, argv, ranks);
  if (!start_error.empty()) {
    err << "composer-cpp launch: " << start_error << "; stopping the " << ranks.size() << " ranks started\n";
  }
  const Outcome res = supervise(ranks, o, !start_error.empty(), out, err);
  if (!start_error.empty()) {
    err << "composer-cpp launch: failed: " << start_error << "\n";
    return 1;
  }
  if (res.forwarded != 0) {
    err << "composer-cpp launch: stopped by " << ::strsignal(res.forwarded) << "\n";
    return 128 + res.forwarded;
  }
  if (res.failed_rank >= 0) {
    err << "composer-cpp launch: failed: rank " << res.failed_rank << " (exit code " << res.failed_code << ")\n";
    return res.failed_code;
  }
  return 0;
}

}  // namespace composer::cli
