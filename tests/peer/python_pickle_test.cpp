// The reader for files Python wrote with objects LibTorch's unpickler refuses (formats/detail/python_pickle.h),
// on a file torch.save writes in the project environment.
#include "support/python.h"

#include "formats/detail/pickle_io.h"
#include "formats/detail/python_pickle.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

TEST(PythonPickleTest, ReadsTheObjectsComposerCheckpointsHold) {
  COMPOSER_REQUIRE_PYTHON("torch numpy");
  const fs::path dir = fs::temp_directory_path() / ("composer_pypickle_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "objects.pt").string(), script = (dir / "write.py").string();
  std::ofstream(script) << R"(import collections, datetime, enum, sys
import numpy as np, torch
class Mode(enum.Enum):
    TRAIN = 'train'
base = torch.arange(12, dtype=torch.float64).reshape(3, 4)
torch.save({
    'td': datetime.timedelta(days=1, seconds=90, microseconds=5),
    'od': collections.OrderedDict([('a', 1), ('b', -2 ** 40)]),
    'np': np.arange(3, dtype=np.uint32),
    'view': base[1:, 1:3], 'base': base, 'param': torch.nn.Parameter(torch.ones(2, dtype=torch.bfloat16)),
    'tuple': (1, 2.5, 'x', None, True), 'set': {7}, 'bytes': b'ab\x00', 'mode': Mode.TRAIN,
}, sys.argv[1])
)";
  const auto py = testing::run_python({script, path});
  ASSERT_EQ(py.status, 0) << py.output;
  const c10::IValue value = detail::unpickle_file(path);  // LibTorch's unpickler refuses it; ours reads it
  const auto d = value.toGenericDict();
  EXPECT_DOUBLE_EQ(d.at("td").toDouble(), 86400 + 90 + 5e-6);
  const auto od = d.at("od").toGenericDict();
  EXPECT_EQ(od.at("a").toInt(), 1);
  EXPECT_EQ(od.at("b").toInt(), -(int64_t{1} << 40));
  EXPECT_TRUE(detail::is_python_object(d.at("np")));  // numpy arrays are markers, not values
  EXPECT_TRUE(detail::is_python_object(d.at("mode")));
  const at::Tensor base = d.at("base").toTensor(), view = d.at("view").toTensor();
  EXPECT_TRUE(base.equal(at::arange(12, at::kDouble).reshape({3, 4})));
  EXPECT_TRUE(view.equal(base.slice(0, 1).slice(1, 1, 3)));
  EXPECT_EQ(view.storage().data(), base.storage().data());  // one storage, as in Python
  EXPECT_TRUE(d.at("param").toTensor().equal(at::ones({2}, at::kBFloat16)));
  const auto& t = d.at("tuple").toTupleRef().elements();
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].toInt(), 1);
  EXPECT_DOUBLE_EQ(t[1].toDouble(), 2.5);
  EXPECT_EQ(t[2].toStringRef(), "x");
  EXPECT_TRUE(t[3].isNone());
  EXPECT_TRUE(t[4].toBool());
  EXPECT_EQ(d.at("set").toList().get(0).toInt(), 7);
  EXPECT_EQ(d.at("bytes").toStringRef(), std::string("ab\0", 3));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace composer
