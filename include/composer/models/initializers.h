// Composer's Initializer: the named initialization schemes a model config lists (`initializers: [kaiming_normal,
// bn_ones]`), each applied to every submodule as torch's Module.apply does (children first, then the module).
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace composer::models {

enum class Initializer {
  KAIMING_NORMAL,            // Linear and Conv2d weights: kaiming_normal_ (fan_in, leaky_relu gain, a = 0)
  KAIMING_UNIFORM,           // Linear and Conv2d weights: kaiming_uniform_
  BN_UNIFORM,                // BatchNorm2d: weight uniform in [0, 1), bias 0
  BN_ONES,                   // BatchNorm2d: weight 1, bias 0
  XAVIER_UNIFORM,            // Linear and Conv2d weights: xavier_uniform_
  XAVIER_NORMAL,             // Linear and Conv2d weights: xavier_normal_
  LINEAR_LOG_CONSTANT_BIAS,  // Linear biases: -log(out_features)
};

/// Composer's value ("kaiming_normal"); std::invalid_argument naming `name` and the known ones otherwise.
Initializer initializer_from_string(const std::string& name);
std::string to_string(Initializer initializer);
/// Every initializer's name, in Composer's order.
std::vector<std::string> initializer_names();

/// Applies `initializer` to `module` and every module below it, children before parents (Module.apply's order, so
/// the random draws come in Composer's order). Acts on this library's nn layers and torch::nn's Linear, Conv2d and
/// BatchNorm2d; a Linear without a bias is left alone by LINEAR_LOG_CONSTANT_BIAS.
void apply_initializer(torch::nn::Module& module, Initializer initializer);

}  // namespace composer::models
