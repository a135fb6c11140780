// StreamingDataset against shards written by MosaicML Streaming's own MDSWriter (tests/data/mds_write.py) and read
// back by its StreamingDataset: Fashion-MNIST images and labels, a text corpus with zstd and hashes streamed from a
// real S3 server (moto) into a cache; the order's partition over ranks, mid-epoch and elastic resume; bad inputs.
#include "support/data_paths.h"
#include "support/errors.h"
#include "support/moto_server.h"
#include "support/process.h"
#include "support/run_files.h"

#include "composer/data/streaming_dataset.h"
#include "composer/datasets/registry.h"
#include "data/detail/mds.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

namespace composer {
namespace {

namespace fs = std::filesystem;

nlohmann::json python_read(const fs::path& dir, const std::vector<int64_t>& indices) {
  std::vector<std::string> args{testing::source_dir() + "/tests/data/mds_write.py", "read", dir.string()};
  for (int64_t i : indices) args.push_back(std::to_string(i));
  const auto r = testing::run_python(args);
  EXPECT_EQ(r.status, 0) << r.output;
  return nlohmann::json::parse(
      r.output.substr(r.output.rfind("\n{") == std::string::npos ? 0 : r.output.rfind("\n{") + 1));
}

void write_mds(const std::vector<std::string>& args) {
  std::vector<std::string> argv{testing::source_dir() + "/tests/data/mds_write.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = testing::run_python(argv);
  ASSERT_EQ(r.status, 0) << r.output;
}

TEST(StreamingDatasetTest, ReadsFashionMnistShardsAsStreamingReadsThem) {
  COMPOSER_REQUIRE_PYTHON("streaming PIL");
  COMPOSER_REQUIRE_DATA(testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"));
  const fs::path dir = testing::fresh_dir("mds_fashion");
  write_mds({"fashion", (dir / "mds").string(), testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"),
             testing::data_path("fashion-mnist/train-labels-idx1-ubyte.gz"), "1000"});
  auto ds =
      std::make_shared<StreamingDataset>(StreamingDatasetOptions().local((dir / "mds").string()).validate_hash("sha1"));
  EXPECT_EQ(ds->size(), 1000);
  EXPECT_GT(ds->num_shards(), 5);
  const Batch b = ds->get_batch(at::tensor({0, 500, 999}, at::kLong));
  ASSERT_EQ(b.at("image").sizes(), (std::vector<int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(b.at("image").scalar_type(), at::kByte);
  const auto ref = python_read(dir / "mds", {0, 500, 999});
  int k = 0;
  for (const char* i : {"0", "500", "999"}) {
    const auto pixels = ref[i]["image"].get<std::vector<std::vector<int>>>();
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) ASSERT_EQ(b.at("image")[k][0][y][x].item<int>(), pixels[y][x]) << i;
    EXPECT_EQ(b.at("label")[k].item<int64_t>(), ref[i]["label"].get<int64_t>());
    ++k;
  }
  // A loader over it: every sample once per epoch, batches of 64.
  auto loader = make_streaming_loader(ds, DatasetLoaderOptions(64).num_workers(2), 0, 1);
  loader->set_epoch(0);
  loader->reset();
  int64_t seen = 0;
  while (auto batch = loader->next()) seen += batch->num_samples();
  EXPECT_EQ(seen, 1000);
  EXPECT_EQ(*loader->length(), 16);
}

/// The pixels of a value Streaming decoded (HxW or HxWxC nested lists) as uint8 [C, H, W].
at::Tensor pil_pixels(const nlohmann::json& v) {
  std::vector<uint8_t> flat;
  const int64_t h = static_cast<int64_t>(v.size()), w = static_cast<int64_t>(v[0].size());
  const int64_t c = v[0][0].is_array() ? static_cast<int64_t>(v[0][0].size()) : 1;
  for (const auto& row : v)
    for (const auto& px : row)
      if (px.is_array())
        for (const auto& x : px) flat.push_back(x.get<uint8_t>());
      else
        flat.push_back(px.get<uint8_t>());
  return at::tensor(flat, at::kByte).reshape({h, w, c}).permute({2, 0, 1});
}

TEST(StreamingDatasetTest, DecodesJpegPngAndImageListsAsStreamingDoes) {
  COMPOSER_REQUIRE_PYTHON("streaming PIL");
  COMPOSER_REQUIRE_DATA(testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"));
  const fs::path dir = testing::fresh_dir("mds_images");
  write_mds({"images", (dir / "mds").string(), testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"), "60"});
  auto ds = std::make_shared<StreamingDataset>(StreamingDatasetOptions().local((dir / "mds").string()));
  const Batch b = ds->get_batch(at::tensor({0, 31, 59}, at::kLong));
  EXPECT_EQ(b.at("gray_jpeg").sizes(), (std::vector<int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(b.at("rgb_png").sizes(), (std::vector<int64_t>{3, 3, 28, 28}));
  EXPECT_EQ(b.at("pngs").sizes(), (std::vector<int64_t>{3, 2, 3, 28, 28}));
  EXPECT_EQ(b.at("jpegs").sizes(), (std::vector<int64_t>{3, 2, 1, 28, 28}));
  const auto ref = python_read(dir / "mds", {0, 31, 59});
  int k = 0;
  for (const char* i : {"0", "31", "59"}) {
    // PNG is lossless; the JPEGs decode to PIL's pixels exactly (the same libjpeg-turbo algorithms).
    for (const char* col : {"gray_jpeg", "gray_png", "rgb_jpeg", "rgb_png"})
      EXPECT_TRUE(at::equal(b.at(col)[k], pil_pixels(ref[i][col]))) << col << " of sample " << i;
    for (int e = 0; e < 2; ++e) {
      EXPECT_TRUE(at::equal(b.at("pngs")[k][e], pil_pixels(ref[i]["pngs"][e]))) << "pngs of sample " << i;
      EXPECT_TRUE(at::equal(b.at("jpegs")[k][e], pil_pixels(ref[i]["jpegs"][e]))) << "jpegs of sample " << i;
    }
    ++k;
  }
  EXPECT_FALSE(at::equal(b.at("gray_jpeg"), b.at("gray_png")));  // the JPEG is lossy: a real decode, not a copy
}

TEST(StreamingDatasetTest, DamagedImagesAreClearErrors) {
  const std::string not_jpeg =
      testing::any_error_of([] { detail::mds_decode_tensor("jpeg", "GIF89a...", "s.mds sample 3 column 'x'"); });
  EXPECT_NE(not_jpeg.find("s.mds sample 3 column 'x': not a readable JPEG"), std::string::npos) << not_jpeg;
  const std::string not_png = testing::any_error_of([] { detail::mds_decode_tensor("png", "\x89PNX", "column 'y'"); });
  EXPECT_NE(not_png.find("column 'y': not a readable PNG"), std::string::npos) << not_png;
  const std::string short_list = testing::any_error_of(
      [] { detail::mds_decode_tensor("list[png]", std::string("\0\0\0\0\5\0\0\0", 8), "column 'z'"); });
  EXPECT_NE(short_list.find("column 'z': an image list of 5 images in 8 bytes"), std::string::npos) << short_list;
}

TEST(StreamingDatasetTest, StreamsZstdTextShardsFromS3IntoACacheWithHashesChecked) {
  COMPOSER_REQUIRE_PYTHON("streaming moto boto3");
  COMPOSER_REQUIRE_DATA(testing::data_path("text/mobydick.txt"));
  const fs::path dir = testing::fresh_dir("mds_s3");
  write_mds({"text", (dir / "mds").string(), testing::data_path("text/mobydick.txt"), "600"});
  testing::MotoServer server(dir / "server", {"data"});
  ASSERT_EQ(server.boto("put_dir", {"data", "corpus/train", (dir / "mds").string()}).status, 0);
  const fs::path cache = dir / "cache";
  auto ds = std::make_shared<StreamingDataset>(
      StreamingDatasetOptions().remote("s3://data/corpus").split("train").local(cache.string()).validate_hash("sha1"));
  EXPECT_EQ(ds->size(), 600);
  EXPECT_GT(ds->num_shards(), 3);
  const Batch b = ds->get_batch(at::tensor({3, 599}, at::kLong));
  // MDSWriter sorts the columns by name: meta, offset, raw, score, text, tokens; the tensor ones form the batch.
  EXPECT_EQ(b.keys(), (std::vector<std::string>{"offset", "score", "tokens"}));
  const auto ref = python_read(dir / "mds", {3, 599});
  EXPECT_EQ(b.at("tokens").sizes(), (std::vector<int64_t>{2, 128}));
  const auto tokens = ref["3"]["tokens"].get<std::vector<int64_t>>();
  for (int i = 0; i < 128; ++i) ASSERT_EQ(b.at("tokens")[0][i].item<int64_t>(), tokens[i]);
  EXPECT_EQ(b.at("offset")[1].item<int64_t>(), ref["599"]["offset"].get<int64_t>());
  EXPECT_DOUBLE_EQ(b.at("score")[1].item<double>(), ref["599"]["score"].get<double>());
  const auto strings = ds->sample_strings(599);
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(strings[0].second), ref["599"]["meta"]);
  EXPECT_EQ(strings[1].second, ref["599"]["raw"].get<std::string>());
  EXPECT_EQ(strings[2].second, ref["599"]["text"].get<std::string>());
  // The cache holds the decompressed shards that were read, not the zstd files.
  int raw = 0;
  for (const auto& e : fs::directory_iterator(cache / "train")) {
    EXPECT_NE(e.path().extension(), ".zstd") << e.path();
    raw += e.path().extension() == ".mds";
  }
  EXPECT_GE(raw, 2);
  // A whole epoch through a loader; the prefetcher fetched ahead; with a cache of ~2 shards, evicted as it went.
  auto small = std::make_shared<StreamingDataset>(StreamingDatasetOptions()
                                                      .remote("s3://data/corpus")
                                                      .split("train")
                                                      .local((dir / "small").string())
                                                      .cache_limit(2 * 40000)
                                                      .columns({"tokens"}));
  auto loader = make_streaming_loader(small, DatasetLoaderOptions(50).num_workers(0), 0, 1);
  loader->set_epoch(0);
  loader->reset();
  auto cached_bytes = [&] {
    // The prefetcher fetches and evicts on its own thread: a shard listed here may be gone before its size is read.
    int64_t bytes = 0;
    std::error_code gone;
    for (const auto& e : fs::directory_iterator(dir / "small" / "train", gone)) {
      const auto size = e.path().extension() == ".mds" ? fs::file_size(e.path(), gone) : 0;
      if (!gone) bytes += static_cast<int64_t>(size);
    }
    return bytes;
  };
  at::Tensor all;
  int64_t most = 0;
  while (auto batch = loader->next()) {
    all = all.defined() ? at::cat({all, batch->at("tokens")}) : batch->at("tokens");
    most = std::max(most, cached_bytes());
  }
  ASSERT_EQ(all.size(0), 600);
  EXPECT_TRUE(at::equal(all[3], b.at("tokens")[0]));
  EXPECT_LE(most, 2 * 40000 + 40000);  // the limit, plus at most one shard on its way in

  // A damaged shard in the bucket: the hash check names it, and the damaged file does not stay in the cache.
  std::string victim;
  for (const auto& e : fs::directory_iterator(dir / "mds"))
    if (e.path().extension() == ".zstd") victim = e.path().filename().string();
  ASSERT_FALSE(victim.empty());
  {
    std::fstream f(dir / "mds" / victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x55');
  }
  ASSERT_EQ(server.boto("put", {"data", "corpus/train/" + victim, (dir / "mds" / victim).string()}).status, 0);
  auto damaged = std::make_shared<StreamingDataset>(StreamingDatasetOptions()
                                                        .remote("s3://data/corpus")
                                                        .split("train")
                                                        .local((dir / "d").string())
                                                        .validate_hash("sha1"));
  std::string e;
  for (int64_t i = 0; i < damaged->size() && e.empty(); i += 10) {
    try {
      damaged->get_batch(at::tensor({i}, at::kLong));
    } catch (const std::exception& ex) {
      e = ex.what();
    }
  }
  EXPECT_NE(e.find(victim), std::string::npos) << e;
  EXPECT_NE(e.find("sha1 check"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir / "d" / "train" / victim));
}

TEST(StreamingDatasetTest, RanksOfANodeShareOneCache) {
  // Four processes read their parts of two shuffled epochs from one remote through one cache folder with a limit of
  // three shards: zstd shards decompressed and removed, hashes checked, evictions by one rank of shards the others
  // are fetching. Every sample arrives once per epoch with the right content, and the node's cache stays bounded.
  COMPOSER_REQUIRE_PYTHON("streaming");
  COMPOSER_REQUIRE_DATA(testing::data_path("text/mobydick.txt"));
  const fs::path dir = testing::fresh_dir("mds_shared_cache");
  write_mds({"text", (dir / "mds").string(), testing::data_path("text/mobydick.txt"), "1200"});
  StreamingDataset source(StreamingDatasetOptions().local((dir / "mds").string()).columns({"tokens"}));
  ASSERT_GT(source.num_shards(), 10);
  const at::Tensor expected = source.get_batch(at::arange(source.size())).at("tokens").sum(1);
  // The limit counts the files in the cache: measure the largest decompressed shard and compressed file.
  int64_t largest = 0, largest_zip = 0;
  for (const auto& e : fs::directory_iterator(dir / "mds"))
    if (e.path().extension() == ".zstd") largest_zip = std::max<int64_t>(largest_zip, fs::file_size(e.path()));
  ASSERT_GT(largest_zip, 0);  // the source folder keeps its compressed files (it is the only copy)
  {
    StreamingDataset probe(
        StreamingDatasetOptions().remote("file://" + (dir / "mds").string()).local((dir / "probe").string()));
    for (int64_t i = 0; i < probe.size(); i += 50) probe.get_batch(at::tensor({i}, at::kLong));
    for (const auto& e : fs::directory_iterator(dir / "probe"))
      if (e.path().extension() == ".mds") largest = std::max<int64_t>(largest, fs::file_size(e.path()));
  }
  const int64_t limit = 3 * largest, world = 4;
  const fs::path cache = dir / "cache";
  auto cached_bytes = [&] {
    int64_t bytes = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache, ec))
      if (e.path().extension() == ".mds" || e.path().extension() == ".zstd")
        bytes += static_cast<int64_t>(fs::file_size(e.path(), ec));
    return bytes;
  };
  std::atomic<bool> running{true};
  std::atomic<int64_t> most{0};
  std::thread watch([&] {
    while (running) {
      most = std::max<int64_t>(most, cached_bytes());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<std::unique_ptr<testing::ChildProcess>> ranks;
  for (int64_t r = 0; r < world; ++r)
    ranks.push_back(std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{STREAMING_CACHE_WORKER, "file://" + (dir / "mds").string(), cache.string(),
                                 std::to_string(r), std::to_string(world), std::to_string(limit), "2"}));
  std::vector<std::vector<int>> seen(2, std::vector<int>(static_cast<size_t>(source.size()), 0));
  for (int64_t r = 0; r < world; ++r) {
    std::string line, last;
    while (ranks[r]->read_line(line, 120)) {
      last = line;
      int64_t epoch = 0, index = 0, sum = 0;
      if (std::sscanf(line.c_str(), "sample %ld %ld %ld", &epoch, &index, &sum) != 3) continue;
      ASSERT_TRUE(epoch >= 0 && epoch < 2 && index >= 0 && index < source.size()) << line;
      ++seen[epoch][index];
      ASSERT_EQ(sum, expected[index].item<int64_t>()) << "rank " << r << ": " << line;
    }
    EXPECT_EQ(ranks[r]->wait(), 0) << "rank " << r << ": " << last;
    EXPECT_EQ(last, "done") << "rank " << r;
  }
  running = false;
  watch.join();
  for (int epoch = 0; epoch < 2; ++epoch)
    for (int64_t i = 0; i < source.size(); ++i) ASSERT_EQ(seen[epoch][i], 1) << "epoch " << epoch << " sample " << i;
  // The limit holds for the node, not per rank (that allowed up to 4x the limit here): beyond it only what the ranks
  // have in flight, which no rank may evict yet: per rank the shard its reader fetches and the one its prefetcher
  // fetches (predownload), each with its compressed and decompressed files. Room is made before a fetch, and other
  // ranks' fetches in flight are not on disk yet when it is counted (a cold CI run once saw 1.01x one shard a rank).
  EXPECT_LE(most.load(), limit + world * 2 * (largest + largest_zip)) << "limit " << limit << ", shard " << largest;
  EXPECT_GT(most.load(), 0);
  std::cout << "most cached: " << most.load() << " bytes (limit " << limit << ", largest shard " << largest
            << ", compressed " << largest_zip << ")\n";
}

TEST(StreamingDatasetTest, OrderPartitionsOverRanksAndResumesOnAnotherWorldSize) {
  COMPOSER_REQUIRE_PYTHON("streaming PIL");
  COMPOSER_REQUIRE_DATA(testing::data_path("text/mobydick.txt"));
  const fs::path dir = testing::fresh_dir("mds_order");
  write_mds({"text", (dir / "mds").string(), testing::data_path("text/mobydick.txt"), "301"});
  auto ds = std::make_shared<StreamingDataset>(
      StreamingDatasetOptions().local((dir / "mds").string()).shuffle(true).shuffle_block_size(50));
  const auto order0 = ds->global_order(0), order1 = ds->global_order(1);
  EXPECT_EQ(std::set<int64_t>(order0.begin(), order0.end()).size(), 301u);
  EXPECT_NE(order0, order1);
  EXPECT_EQ(order0, ds->global_order(0));
  // Three ranks: 101 samples each (MosaicML Streaming's padding), together every sample, and the 2 that pad the last
  // round are the global order's first two.
  std::multiset<int64_t> together;
  for (int64_t r = 0; r < 3; ++r) {
    const at::Tensor o = ds->sample_order(0, 0, r, 3);
    EXPECT_EQ(o.size(0), 101);
    for (int64_t i = 0; i < o.size(0); ++i) together.insert(o[i].item<int64_t>());
  }
  EXPECT_EQ(together.size(), 303u);
  EXPECT_EQ(std::set<int64_t>(together.begin(), together.end()).size(), 301u);
  EXPECT_EQ(together.count(order0[0]), 2u);
  EXPECT_EQ(together.count(order0[1]), 2u);

  // Saved on 2 ranks after 4 batches of 8 each (64 samples in all), resumed on 3: the rest of the epoch (237, 79 a
  // rank) exactly once.
  std::multiset<int64_t> before, after;
  for (int64_t r = 0; r < 2; ++r) {
    auto loader = make_streaming_loader(ds, DatasetLoaderOptions(8).num_workers(1), r, 2);
    loader->set_epoch(0);
    loader->reset();
    for (int i = 0; i < 4; ++i) {
      const Batch b = *loader->next();
      for (int64_t k = 0; k < b.num_samples(); ++k) before.insert(b.at("offset")[k].item<int64_t>());
    }
  }
  for (int64_t r = 0; r < 3; ++r) {
    auto loader = make_streaming_loader(ds, DatasetLoaderOptions(8).num_workers(2), r, 3);
    loader->set_epoch(0);
    loader->reset();
    loader->resume(4, 64);
    while (auto b = loader->next())
      for (int64_t k = 0; k < b->num_samples(); ++k) after.insert(b->at("offset")[k].item<int64_t>());
  }
  EXPECT_EQ(before.size(), 64u);
  EXPECT_EQ(after.size(), 301u - 64u);
  std::set<int64_t> all(before.begin(), before.end());
  all.insert(after.begin(), after.end());
  EXPECT_EQ(all.size(), 301u);  // no sample twice, none missed
}

/// Flips one byte of a file in place (its size unchanged).
void flip_byte(const fs::path& file, std::streamoff at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  const char c = static_cast<char>(f.get());
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x55));
}

std::string first_error_reading(const StreamingDataset& ds) {
  for (int64_t i = 0; i < ds.size(); ++i) {
    try {
      ds.get_batch(at::tensor({i}, at::kLong));
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  return "";
}

// Local shards (no remote: the only copy) are checked as downloaded ones are, and never deleted; an index or a shard
// that does not hold what the index says is named.
TEST(StreamingDatasetTest, LocalShardsAreCheckedAndTheOnlyCopyIsKept) {
  COMPOSER_REQUIRE_PYTHON("streaming PIL");
  COMPOSER_REQUIRE_DATA(testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"));
  COMPOSER_REQUIRE_DATA(testing::data_path("text/mobydick.txt"));
  const fs::path dir = testing::fresh_dir("mds_local_damage");
  write_mds({"fashion", (dir / "raw").string(), testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"),
             testing::data_path("fashion-mnist/train-labels-idx1-ubyte.gz"), "200"});
  const fs::path shard = dir / "raw" / "shard.00001.mds";
  ASSERT_TRUE(fs::exists(shard));
  flip_byte(shard, static_cast<std::streamoff>(fs::file_size(shard) - 100));
  // Without validate_hash nothing is checked (as Streaming); with it, the flipped byte is found and the file kept.
  EXPECT_EQ(first_error_reading(StreamingDataset(StreamingDatasetOptions().local((dir / "raw").string()))), "");
  const std::string flipped = first_error_reading(
      StreamingDataset(StreamingDatasetOptions().local((dir / "raw").string()).validate_hash("sha1")));
  EXPECT_NE(flipped.find("shard.00001.mds' fails its sha1 check (damaged); kept, as it is the only copy"),
            std::string::npos)
      << flipped;
  EXPECT_TRUE(fs::exists(shard));

  // A local zstd shard that fails its hash is the only copy: named, and still there.
  write_mds({"text", (dir / "zstd").string(), testing::data_path("text/mobydick.txt"), "120"});
  fs::path zip;
  for (const auto& e : fs::directory_iterator(dir / "zstd"))
    if (e.path().extension() == ".zstd") zip = e.path();
  ASSERT_FALSE(zip.empty());
  flip_byte(zip, 30);
  const std::string zipped = first_error_reading(
      StreamingDataset(StreamingDatasetOptions().local((dir / "zstd").string()).validate_hash("sha1")));
  EXPECT_NE(zipped.find(zip.filename().string() + "' fails its sha1 check (damaged); kept, as it is the only copy"),
            std::string::npos)
      << zipped;
  EXPECT_TRUE(fs::exists(zip));

  // A shard of the wrong size is not "missing"; one whose header disagrees with the index is named.
  write_mds({"fashion", (dir / "cut").string(), testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"),
             testing::data_path("fashion-mnist/train-labels-idx1-ubyte.gz"), "200"});
  const fs::path cut = dir / "cut" / "shard.00000.mds";
  fs::resize_file(cut, fs::file_size(cut) - 7);
  const std::string short_file =
      first_error_reading(StreamingDataset(StreamingDatasetOptions().local((dir / "cut").string())));
  EXPECT_NE(short_file.find("shard.00000.mds' has " + std::to_string(fs::file_size(cut)) + " bytes; the index says " +
                            std::to_string(fs::file_size(cut) + 7) + "; kept"),
            std::string::npos)
      << short_file;
  nlohmann::json index = nlohmann::json::parse(std::ifstream(dir / "raw" / "index.json"));
  const int64_t held = index["shards"][0]["samples"].get<int64_t>();
  index["shards"][0]["samples"] = held + 1;
  std::ofstream(dir / "raw" / "index.json") << index.dump();
  const std::string header = testing::any_error_of(
      [&] { StreamingDataset(StreamingDatasetOptions().local((dir / "raw").string())).get_batch(at::tensor({0})); });
  EXPECT_NE(header.find("shard.00000.mds': its header says it holds " + std::to_string(held) +
                        " samples; the index says " + std::to_string(held + 1)),
            std::string::npos)
      << header;
  index["version"] = 3;
  std::ofstream(dir / "raw" / "index.json") << index.dump();
  const std::string version =
      testing::any_error_of([&] { StreamingDataset(StreamingDatasetOptions().local((dir / "raw").string())); });
  EXPECT_NE(version.find("index.json: index version 3 (expected 2"), std::string::npos) << version;
}

// Through `dataset: streaming`: labels outside num_classes and an image of another size name the key and the column.
TEST(StreamingDatasetTest, LabelsAndImageSizesNameTheKeyAndColumn) {
  COMPOSER_REQUIRE_PYTHON("streaming PIL");
  const fs::path dir = testing::fresh_dir("mds_mixed");
  write_mds({"mixed", (dir / "mds").string()});
  auto read_all = [&](const std::map<std::string, std::string>& extra) {
    std::map<std::string, std::string> keys{{"local", (dir / "mds").string()}, {"batch_size", "4"}};
    for (const auto& [k, v] : extra) keys[k] = v;
    return testing::any_error_of([&] {
      const auto source = datasets::dataset_registry().make("streaming", keys, "train_data", datasets::DataRequest{});
      source->loader->set_epoch(0);
      source->loader->reset();
      while (source->loader->next()) {
      }
    });
  };
  const std::string size = read_all({{"shuffle", "false"}});
  EXPECT_NE(size.find("column 'image' has samples of different shapes in one batch: sample 4 (shard"),
            std::string::npos)
      << size;
  EXPECT_NE(size.find("has [1, 24, 24]"), std::string::npos) << size;
  const std::string labels = read_all({{"shuffle", "false"}, {"num_classes", "3"}, {"batch_size", "1"}});
  EXPECT_NE(labels.find("train_data: column 'label' holds the label 3, outside num_classes = 3 (labels 0 to 2)"),
            std::string::npos)
      << labels;
  const std::string one_by_one = read_all({{"shuffle", "false"}, {"batch_size", "1"}});
  EXPECT_NE(one_by_one.find("train_data: column 'image' holds images of [1, 24, 24]; the first sample's, which the "
                            "model was shaped for, are [1, 28, 28]"),
            std::string::npos)
      << one_by_one;
}

TEST(StreamingDatasetTest, BadInputsAreClearErrors) {
  COMPOSER_REQUIRE_PYTHON("streaming");
  const fs::path dir = testing::fresh_dir("mds_bad");
  EXPECT_NE(testing::any_error_of([&] {
              StreamingDataset(StreamingDatasetOptions().local((dir / "none").string()));
            }).find("no index at"),
            std::string::npos);
  EXPECT_NE(testing::any_error_of([&] { StreamingDataset{StreamingDatasetOptions()}; }).find("local = ''"),
            std::string::npos);
  EXPECT_NE(testing::any_error_of([&] {
              StreamingDataset(StreamingDatasetOptions().local("x").remote("bucket/x"));
            }).find("remote = 'bucket/x'"),
            std::string::npos);
  EXPECT_NE(testing::any_error_of([&] {
              StreamingDataset(StreamingDatasetOptions().local("x").validate_hash("crc"));
            }).find("validate_hash = 'crc'"),
            std::string::npos);
  write_mds({"pkl", (dir / "pkl").string()});
  const std::string pkl =
      testing::any_error_of([&] { StreamingDataset(StreamingDatasetOptions().local((dir / "pkl").string())); });
  EXPECT_NE(pkl.find("column 'obj'"), std::string::npos) << pkl;
  EXPECT_NE(pkl.find("'pkl' runs arbitrary code"), std::string::npos) << pkl;
  fs::create_directories(dir / "json");
  std::ofstream(dir / "json" / "index.json") << "{not json";
  EXPECT_NE(testing::any_error_of([&] {
              StreamingDataset(StreamingDatasetOptions().local((dir / "json").string()));
            }).find("is not JSON"),
            std::string::npos);
  std::ofstream(dir / "json" / "index.json") << R"({"version": 2, "shards": [{"format": "mds", "version": 2,
    "column_names": ["x"], "column_encodings": ["int"], "column_sizes": [8], "compression": "lz4",
    "raw_data": {"basename": "s.mds", "bytes": 10}, "samples": 1}]})";
  EXPECT_NE(testing::any_error_of([&] {
              StreamingDataset(StreamingDatasetOptions().local((dir / "json").string()));
            }).find("compression 'lz4' is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace composer
