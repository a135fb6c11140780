// composer-cpp launch when ranks cannot start: an -n that no node runs is refused up front, and when fork() fails
// part way (a real process limit, RLIMIT_NPROC, for an unprivileged user) the launcher names the rank it could not
// start, stops the ranks it did start and exits at once, and signals no process it did not start itself (a process
// of the same user beside it lives on; a failed fork's -1 reaching kill() would have signalled it).
#include "support/process.h"
#include "support/worker_run.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>

namespace composer {
namespace {

TEST(LaunchTest, TooManyRanksIsRefusedUpFront) {
  const auto run = testing::run_worker({COMPOSER_CPP, "launch", "-n", "10000", "--", "/bin/true"}, 30);
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("-n 10000 is more ranks than one node runs; expected at most 1024"), std::string::npos)
      << run.output;
}

TEST(LaunchTest, RanksThatCannotStartStopTheOthersAndNoOtherProcessIsSignalled) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the launcher as another user under a process limit";
  // Both as the user nobody: a bystander, and the launcher allowed 6 processes of that user in all.
  const std::vector<std::string> as_nobody{"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  std::vector<std::string> bystander_argv = as_nobody;
  bystander_argv.push_back("/bin/sleep");
  bystander_argv.push_back("300");
  testing::ChildProcess bystander(bystander_argv);
  std::vector<std::string> argv = as_nobody;
  for (const char* a :
       {"/usr/bin/prlimit", "--nproc=6", "--", COMPOSER_CPP, "launch", "-n", "10", "--", "/bin/sleep", "300"})
    argv.emplace_back(a);
  const auto start = std::chrono::steady_clock::now();
  const auto run = testing::run_worker(argv, 120);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find("composer-cpp launch: cannot start rank "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(" of 10: fork: Resource temporarily unavailable; stopping the "), std::string::npos)
      << run.output;
  EXPECT_LT(seconds, 20) << "the started ranks were not stopped at once\n" << run.output;
  EXPECT_EQ(::kill(bystander.pid(), 0), 0) << "the launcher signalled a process it did not start";
  EXPECT_EQ(::waitpid(bystander.pid(), nullptr, WNOHANG), 0) << "the bystander ended\n" << run.output;
}

}  // namespace
}  // namespace composer
