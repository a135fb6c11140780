// composer-cpp launch: starts N local ranks of a program with the distributed environment set.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace composer::cli {

struct LaunchOptions {
  int nproc = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  /// This node's address for the ranks' Gloo connections (COMPOSER_NODE_ADDR); empty = chosen by the ranks
  /// (dist::listen_address).
  std::string node_addr;
  /// 0 = a free port (single node only).
  int master_port = 0;
  /// Seconds the ranks get after SIGTERM before SIGKILL, once one rank failed or the launcher got a stop signal.
  double grace_seconds = 30.0;
  /// The program and its arguments; "train ..." / "eval ..." run this composer-cpp.
  std::vector<std::string> command;
};

/// Starts ranks node_rank*nproc .. +nproc-1 with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK,
/// MASTER_ADDR and MASTER_PORT set, prefixes each output line with "[rank N] ", and returns 0 when all succeed.
/// When a rank fails it names the rank, stops the others (SIGTERM, then SIGKILL after the grace period) and returns
/// that rank's exit code (128 + signal when it was killed).
int launch_command(const LaunchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace composer::cli
