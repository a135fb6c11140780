// The object stores against a real S3 server (moto, started here on loopback with signature checking on), read back
// with boto3; the local and HTTP stores; the background uploader's ordering and retries.
#include "support/errors.h"
#include "support/moto_server.h"
#include "support/run_files.h"
#include "support/silent_listener.h"

#include "composer/storage/http_object_store.h"
#include "composer/storage/local_object_store.h"
#include "composer/storage/remote_uploader.h"
#include "composer/storage/s3_object_store.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

namespace composer {
namespace {

namespace fs = std::filesystem;

std::string write_random(const fs::path& path, size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << bytes;
  return bytes;
}

std::string slurp(const fs::path& path) { return testing::read_text(path.string()); }

TEST(S3ObjectStoreTest, RoundTripsSmallAndMultipartObjectsReadableByBoto3) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  const fs::path dir = testing::fresh_dir("s3_roundtrip");
  testing::MotoServer server(dir / "server", {"composer-data"});
  S3ObjectStore store("composer-data", "", ObjectStoreOptions().multipart_threshold(6 << 20).part_size(5 << 20));
  EXPECT_EQ(store.endpoint(), server.url());

  const std::string small = write_random(dir / "small.bin", 1000, 1);
  const std::string big = write_random(dir / "big.bin", (12 << 20) + 123, 2);  // three parts: 5 + 5 + 2 MiB
  store.upload_object("runs/a b+c/small.bin", (dir / "small.bin").string());
  store.upload_object("runs/big.bin", (dir / "big.bin").string());
  EXPECT_EQ(store.get_object_size("runs/a b+c/small.bin"), 1000);
  EXPECT_EQ(store.get_object_size("runs/big.bin"), static_cast<int64_t>(big.size()));
  EXPECT_TRUE(store.object_exists("runs/big.bin"));
  EXPECT_FALSE(store.object_exists("runs/nothing"));

  store.download_object("runs/big.bin", (dir / "back" / "big.bin").string());
  EXPECT_TRUE(slurp(dir / "back" / "big.bin") == big);
  // Ranged reads (a Range request): across the multipart object's part boundary, and past its end.
  EXPECT_TRUE(store.reads_ranges());
  EXPECT_TRUE(store.read_range("runs/big.bin", (5 << 20) - 10, 100) == big.substr((5 << 20) - 10, 100));
  EXPECT_EQ(store.read_range("runs/a b+c/small.bin", 0, 1000), small);
  EXPECT_EQ(store.read_range("runs/big.bin", 7, 0), "");
  EXPECT_NE(testing::any_error_of([&] { store.read_range("runs/a b+c/small.bin", 990, 20); })
                .find("reading bytes [990, 1010) of s3://composer-data/runs/a b+c/small.bin failed: the object ends "
                      "first (10 of them exist)"),
            std::string::npos)
      << testing::any_error_of([&] { store.read_range("runs/a b+c/small.bin", 990, 20); });
  EXPECT_NE(
      testing::any_error_of([&] { store.read_range("runs/a b+c/small.bin", 2000, 20); }).find("past the object's end"),
      std::string::npos);
  EXPECT_THROW(store.read_range("runs/nothing", 0, 10), ObjectNotFoundError);
  store.download_object("runs/a b+c/small.bin", (dir / "back" / "small.bin").string());
  EXPECT_TRUE(slurp(dir / "back" / "small.bin") == small);
  EXPECT_NE(testing::any_error_of([&] {
              store.download_object("runs/big.bin", (dir / "back" / "big.bin").string());
            }).find("already exists"),
            std::string::npos);

  // boto3 sees the same objects, byte for byte (the multipart one assembled in order).
  const auto stat = server.boto("stat", {"composer-data", "runs/big.bin"});
  ASSERT_EQ(stat.status, 0) << stat.output;
  EXPECT_EQ(nlohmann::json::parse(stat.output)["size"], big.size());
  EXPECT_EQ(server.boto("get", {"composer-data", "runs/a b+c/small.bin"}).output, small);

  const auto listed = store.list_objects("runs/");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].name, "runs/a b+c/small.bin");
  EXPECT_EQ(listed[0].size, 1000);
  EXPECT_EQ(listed[1].name, "runs/big.bin");
  EXPECT_EQ(store.list_objects("runs/a b").size(), 1u);

  // A prefix store sees names below its prefix only.
  S3ObjectStore runs("composer-data", "runs");
  EXPECT_EQ(runs.get_uri("big.bin"), "s3://composer-data/runs/big.bin");
  EXPECT_EQ(runs.list_objects().size(), 2u);

  store.delete_object("runs/big.bin");
  store.delete_object("runs/big.bin");  // a missing object is not an error
  EXPECT_EQ(server.list("composer-data"), std::vector<std::string>{"runs/a b+c/small.bin"});

  // More objects than one listing page (S3 pages at 1000 keys): boto3 writes them, the store lists them all.
  std::vector<std::string> many;
  for (int i = 0; i < 1005; ++i) many.push_back("page/" + std::to_string(10000 + i));
  for (const auto& k : many) store.upload_object(k, (dir / "small.bin").string());
  EXPECT_EQ(store.list_objects("page/").size(), many.size());
}

TEST(S3ObjectStoreTest, RefusedCredentialsMissingBucketsAndObjectsNameBucketAndKey) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  const fs::path dir = testing::fresh_dir("s3_errors");
  testing::MotoServer server(dir / "server", {"composer-data"});
  write_random(dir / "f.bin", 10, 3);
  {
    testing::ScopedEnv env;
    env.set("AWS_SECRET_ACCESS_KEY", "not-the-secret");
    S3ObjectStore store("composer-data");
    const std::string e = testing::any_error_of([&] { store.upload_object("run/f.bin", (dir / "f.bin").string()); });
    EXPECT_NE(e.find("s3://composer-data/run/f.bin"), std::string::npos) << e;
    EXPECT_NE(e.find("SignatureDoesNotMatch"), std::string::npos) << e;
    EXPECT_NE(e.find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << e;
  }
  {
    testing::ScopedEnv env;
    env.set("AWS_ACCESS_KEY_ID", "AKIAUNKNOWNKEY000000");
    S3ObjectStore store("composer-data");
    const std::string e = testing::any_error_of([&] { store.list_objects("run/"); });
    EXPECT_NE(e.find("InvalidAccessKeyId"), std::string::npos) << e;
    EXPECT_NE(e.find("s3://composer-data/run/"), std::string::npos) << e;
  }
  S3ObjectStore missing("no-such-bucket");
  EXPECT_THROW(missing.upload_object("k", (dir / "f.bin").string()), ObjectNotFoundError);
  const std::string e = testing::any_error_of([&] { missing.get_object_size("ckpt/latest.pt"); });
  EXPECT_NE(e.find("bucket 'no-such-bucket' does not exist"), std::string::npos) << e;
  EXPECT_NE(e.find("s3://no-such-bucket/ckpt/latest.pt"), std::string::npos) << e;

  S3ObjectStore store("composer-data");
  const std::string nf =
      testing::any_error_of([&] { store.download_object("run/none.pt", (dir / "none.pt").string()); });
  EXPECT_NE(nf.find("s3://composer-data/run/none.pt"), std::string::npos) << nf;
  EXPECT_NE(nf.find("no such object"), std::string::npos) << nf;
  EXPECT_FALSE(fs::exists(dir / "none.pt"));  // nothing half-written
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();

  // An endpoint nobody listens on: a transient error after the attempts, naming the endpoint.
  S3ObjectStore down("composer-data", "",
                     ObjectStoreOptions()
                         .endpoint_url("http://127.0.0.1:" + std::to_string(testing::unused_port()))
                         .num_attempts(2)
                         .connect_timeout(1));
  const std::string d = testing::any_error_of([&] { down.get_object_size("k"); });
  EXPECT_NE(d.find("2 attempts"), std::string::npos) << d;
  EXPECT_THROW(down.get_object_size("k"), ObjectStoreTransientError);
}

TEST(ObjectStoreTest, UrisLocalStoreAndBadInputs) {
  const ParsedUri p = parse_uri("s3://bucket/a/b.pt");
  EXPECT_EQ(p.backend, "s3");
  EXPECT_EQ(p.bucket, "bucket");
  EXPECT_EQ(p.path, "a/b.pt");
  EXPECT_EQ(parse_uri("/local/x").backend, "");
  EXPECT_EQ(parse_uri("/local/x").path, "/local/x");
  EXPECT_TRUE(is_object_store_uri("s3://b"));
  EXPECT_FALSE(is_object_store_uri("runs/ckpt"));
  EXPECT_FALSE(is_object_store_uri("/a://b"));
  for (const char* typo : {"s3:/bucket/x", "s3:bucket", "https:/host/a", "file:/tmp/x"}) {
    try {
      is_object_store_uri(typo);
      ADD_FAILURE() << typo << " was taken";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + typo + "' looks like a mistyped object-store URI"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_FALSE(is_object_store_uri("s3"));
  EXPECT_FALSE(is_object_store_uri("runs/s3:x"));

  const fs::path dir = testing::fresh_dir("local_store");
  write_random(dir / "f.bin", 100, 4);
  auto store = make_object_store("file://" + (dir / "bucket").string());
  const std::string name = parse_uri("file://" + (dir / "bucket" / "x" / "f.bin").string()).path;
  store->upload_object(name, (dir / "f.bin").string());
  EXPECT_EQ(store->get_object_size(name), 100);
  EXPECT_EQ(store->get_uri(name), "file://" + (dir / "bucket" / "x" / "f.bin").string());
  const std::string prefix = parse_uri("file://" + (dir / "bucket").string()).path + "/";
  ASSERT_EQ(store->list_objects(prefix).size(), 1u);
  store->download_object(name, (dir / "back.bin").string());
  EXPECT_EQ(slurp(dir / "back.bin"), slurp(dir / "f.bin"));
  EXPECT_TRUE(store->reads_ranges());
  EXPECT_EQ(store->read_range(name, 10, 20), slurp(dir / "f.bin").substr(10, 20));
  EXPECT_NE(testing::any_error_of([&] { store->read_range(name, 90, 20); }).find("the object has 100 bytes"),
            std::string::npos);
  store->delete_object(name);
  EXPECT_FALSE(store->object_exists(name));
  EXPECT_THROW(store->download_object(name, (dir / "none.bin").string()), ObjectNotFoundError);
  EXPECT_THROW(store->read_range(name, 0, 1), ObjectNotFoundError);
  LocalObjectStore root(dir.string());
  EXPECT_NE(testing::any_error_of([&] { root.get_object_size("../etc/passwd"); }).find("'..'"), std::string::npos);

  EXPECT_NE(testing::any_error_of([] { make_object_store("gs://bucket/x"); }).find("unknown object store 'gs://'"),
            std::string::npos);
  EXPECT_NE(testing::any_error_of([] { make_object_store("s3:///x"); }).find("no bucket"), std::string::npos);
  EXPECT_NE(testing::any_error_of([] { ObjectStoreOptions().part_size(1024).validate(); }).find("part_size"),
            std::string::npos);
  EXPECT_NE(testing::any_error_of([] {
              ObjectStoreOptions().endpoint_url("localhost:9000").validate();
            }).find("endpoint_url"),
            std::string::npos);
  EXPECT_NE(testing::any_error_of([] { RemoteUploader("runs/local"); }).find("not an object-store URI"),
            std::string::npos);
  EXPECT_NE(testing::any_error_of([] { RemoteUploader("https://example.com/x"); }).find("read-only"),
            std::string::npos);
  HttpObjectStore http("http://127.0.0.1:1");
  EXPECT_NE(testing::any_error_of([&] { http.upload_object("x", (dir / "f.bin").string()); }).find("read-only"),
            std::string::npos);
}

// An endpoint that accepts connections and never answers: each attempt times out, and every retry is announced
// (a stalled store used to be silent for attempts x timeout).
TEST(HttpObjectStoreTest, AStoreThatNeverAnswersSaysSoAtEveryRetry) {
  const testing::SilentListener silent;
  const std::string url = silent.url();
  HttpObjectStore store(url, ObjectStoreOptions().timeout(1).num_attempts(2));
  ::testing::internal::CaptureStderr();
  EXPECT_ANY_THROW(store.get_object_size("data.bin"));
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("composer: object store: HEAD " + url + "/data.bin got no answer ("), std::string::npos) << said;
  EXPECT_NE(said.find("on attempt 1 of 2; retrying (timeout 1 s per attempt)"), std::string::npos) << said;
}

TEST(HttpObjectStoreTest, DownloadsAndSizesFromARealHttpServer) {
  COMPOSER_REQUIRE_PYTHON("http.server");
  const fs::path dir = testing::fresh_dir("http_store");
  fs::create_directories(dir / "served");
  const std::string bytes = write_random(dir / "served" / "data.bin", 5000, 5);
  const int port = testing::unused_port();
  testing::ChildProcess server({testing::python(), "-m", "http.server", std::to_string(port), "--bind", "127.0.0.1",
                                "--directory", (dir / "served").string()});
  HttpObjectStore store("http://127.0.0.1:" + std::to_string(port), ObjectStoreOptions().num_attempts(20));
  EXPECT_EQ(store.get_object_size("data.bin"), 5000);  // retried until the server is up
  store.download_object("data.bin", (dir / "data.bin").string());
  EXPECT_TRUE(slurp(dir / "data.bin") == bytes);
  EXPECT_THROW(store.get_object_size("missing.bin"), ObjectNotFoundError);
  // Python's http.server ignores Range and sends the whole object (200): the range is cut from it.
  EXPECT_TRUE(store.read_range("data.bin", 4000, 1000) == bytes.substr(4000, 1000));
  EXPECT_NE(testing::any_error_of([&] { store.read_range("data.bin", 4500, 1000); }).find("answered 5000 bytes"),
            std::string::npos);
  EXPECT_THROW(store.read_range("missing.bin", 0, 1), ObjectNotFoundError);
  auto via_uri = make_object_store("http://127.0.0.1:" + std::to_string(port) + "/data.bin");
  EXPECT_EQ(via_uri->get_object_size("data.bin"), 5000);
}

// A SIGKILLed process never removes its staging copies; the next uploader removes the folders of processes that are
// gone (a real process that has exited), and keeps those of running ones.
TEST(RemoteUploaderTest, StagingFoldersOfDeadProcessesAreRemoved) {
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ::waitpid(gone, nullptr, 0);
  const fs::path tmp = fs::temp_directory_path();
  const fs::path dead = tmp / ("composer-uploads-" + std::to_string(gone) + "-17");
  const fs::path alive = tmp / ("composer-uploads-" + std::to_string(::getppid()) + "-17");
  for (const fs::path& d : {dead, alive}) {
    fs::create_directories(d);
    std::ofstream(d / "ep0-ba1-rank0.pt") << "staged";
  }
  const fs::path store = testing::fresh_dir("staging_store");
  { RemoteUploader uploader("file://" + store.string()); }
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive / "ep0-ba1-rank0.pt"));
  fs::remove_all(alive);
}

TEST(RemoteUploaderTest, PointerGoesUpAfterTheCheckpointAndUploadsRetryThroughAPausedServer) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  const fs::path dir = testing::fresh_dir("uploader_pause");
  testing::MotoServer server(dir / "server", {"ckpt"});
  const std::string big = write_random(dir / "ckpt.pt", 3 << 20, 6);
  std::ofstream(dir / "latest.symlink") << "run/ckpt.pt";
  {
    RemoteUploader uploader("s3://ckpt/run", RemoteUploaderOptions().num_concurrent_uploads(2).store(
                                                 ObjectStoreOptions().timeout(2).num_attempts(3)));
    server.pause();
    uploader.upload_file_async("run/ckpt.pt", (dir / "ckpt.pt").string());
    uploader.upload_file_after_pending("run/latest-rank0.pt.symlink", (dir / "latest.symlink").string());
    fs::remove(dir / "ckpt.pt");  // staged: the caller's copy may go at once
    std::this_thread::sleep_for(std::chrono::seconds(3));
    EXPECT_TRUE(uploader.uploaded().empty());
    server.resume();
    uploader.wait();
    EXPECT_EQ(uploader.uploaded(), (std::vector<std::string>{"run/ckpt.pt", "run/latest-rank0.pt.symlink"}));
  }
  EXPECT_EQ(server.boto("get", {"ckpt", "run/latest-rank0.pt.symlink"}).output, "run/ckpt.pt");
  EXPECT_EQ(nlohmann::json::parse(server.boto("stat", {"ckpt", "run/ckpt.pt"}).output)["size"], big.size());

  // A failed upload: the pointer queued after it is not uploaded, and wait() names the failure.
  RemoteUploader uploader("s3://no-such-bucket/run");
  std::ofstream(dir / "x.pt") << "x";
  uploader.upload_file_async("run/x.pt", (dir / "x.pt").string());
  uploader.upload_file_after_pending("run/latest.symlink", (dir / "latest.symlink").string());
  const std::string e = testing::any_error_of([&] { uploader.wait(); });
  EXPECT_NE(e.find("no-such-bucket"), std::string::npos) << e;
  EXPECT_NE(e.find("(and 1 more)"), std::string::npos) << e;
  EXPECT_TRUE(uploader.uploaded().empty());

  // overwrite=false refuses an existing object.
  RemoteUploader again("s3://ckpt/run");
  write_random(dir / "ckpt2.pt", 10, 7);
  again.upload_file_async("run/ckpt.pt", (dir / "ckpt2.pt").string(), false);
  EXPECT_NE(testing::any_error_of([&] { again.wait(); }).find("already exists"), std::string::npos);
}

}  // namespace
}  // namespace composer
