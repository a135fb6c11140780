// A checkpoint's leaves by path, and two checkpoints compared leaf by leaf (the FSDP and tensor-parallel tests).
#pragma once

#include "composer/checkpoint/checkpoint.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace composer::testing {

/// Every leaf of a checkpoint's "state/model", "state/optimizers" and "state/timestamp", by "/"-joined path.
inline std::map<std::string, c10::IValue> checkpoint_leaves(const std::string& path) {
  std::map<std::string, c10::IValue> leaves;
  std::function<void(const c10::IValue&, const std::string&)> walk = [&](const c10::IValue& v, const std::string& at) {
    if (v.isGenericDict()) {
      for (const auto& e : v.toGenericDict())
        walk(e.value(), at + "/" + (e.key().isString() ? e.key().toStringRef() : std::to_string(e.key().toInt())));
    } else if (v.isList()) {
      const auto list = v.toList();
      for (size_t i = 0; i < list.size(); ++i) walk(list.get(i), at + "/" + std::to_string(i));
    } else {
      leaves[at] = v;
    }
  };
  const auto state = read_checkpoint(path).toGenericDict().at("state").toGenericDict();
  for (const char* key : {"model", "optimizers", "timestamp"}) walk(state.at(key), key);
  leaves.erase("timestamp/Timestamp/total_wct_seconds");  // wall clock
  leaves.erase("timestamp/Timestamp/iteration_wct_seconds");
  leaves.erase("timestamp/Timestamp/epoch_wct_seconds");
  leaves.erase("timestamp/Timestamp/batch_wct_seconds");
  return leaves;
}

/// The two checkpoints hold the same paths; tensors equal within `tolerance` (0: bitwise), the rest equal (gtest
/// expectations). Returns how many tensors it compared (-1 when the paths differ).
inline int64_t expect_same_checkpoint_state(const std::string& a_path, const std::string& b_path, double tolerance) {
  const auto a = checkpoint_leaves(a_path), b = checkpoint_leaves(b_path);
  std::vector<std::string> a_keys, b_keys;
  for (const auto& [k, v] : a) a_keys.push_back(k);
  for (const auto& [k, v] : b) b_keys.push_back(k);
  EXPECT_EQ(a_keys, b_keys) << a_path << " vs " << b_path;
  if (a_keys != b_keys) return -1;
  int64_t tensors = 0;
  for (const auto& [key, va] : a) {
    const c10::IValue& vb = b.at(key);
    if (!va.isTensor()) {
      EXPECT_TRUE(va == vb) << key << ": " << va << " vs " << vb;
      continue;
    }
    ++tensors;
    const at::Tensor ta = va.toTensor(), tb = vb.toTensor();
    EXPECT_EQ(ta.sizes(), tb.sizes()) << key;
    if (ta.sizes() != tb.sizes()) continue;
    if (tolerance == 0)
      EXPECT_TRUE(at::equal(ta, tb)) << key << " differs (bitwise) between " << a_path << " and " << b_path;
    else
      EXPECT_LT((ta - tb).abs().max().item<double>(), tolerance) << key;
  }
  return tensors;
}

}  // namespace composer::testing
