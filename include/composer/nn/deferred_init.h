// Deferred initialization: build a model without holding its weights, and draw them later, unit by unit, from the
// same random stream a normal build draws them from (Composer's meta-device models with FSDP's param_init_fn, and
// torchdistx's deferred_init, for this library's layers).
//
//   std::shared_ptr<Llama> model;
//   {
//     nn::DeferredInit deferred;             // from here on, parameters hold no values
//     model = std::make_shared<Llama>(config);
//   }                                        // model's parameters have their shapes, and take no memory
//   // Trainer with FSDP: each sharding unit is drawn whole, sharded, and freed before the next is drawn, so that no
//   // rank ever holds the whole model. Other strategies draw the whole model first (nn::materialize).
//
// How the values stay the same: a DeferredInit records the default CPU generator's state when it starts, and every
// initialization this library's layers and models run (nn::initialize) in order. Materializing restores that state
// and replays the record in the same order: an initialization that a later one overwrites only advances the stream
// (drawn into a scratch tensor of the parameter's shape, freed at once; skipped when no later random initialization
// is kept, as in a pretrained load, where every draw is overwritten), the last one fills the parameter. So each
// parameter receives bitwise the values a build without DeferredInit gives it, on every rank, whatever the order in
// which the units are sharded. What the record cannot reproduce is refused when materializing: random draws made
// while recording outside nn::initialize (a torch::nn layer, a torch::randn in a model's constructor), and writes to a
// deferred parameter outside nn::initialize (which already fail when made: a deferred parameter is a zero-stride view
// of one element).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/TensorOptions.h>

#include <functional>
#include <memory>
#include <vector>

namespace torch::nn {
class Module;
}

namespace composer::nn {

struct DeferredRecord;

/// Records, on this thread and until destroyed, the parameters made with new_parameter() and their initializations
/// (initialize()) instead of allocating and running them. Not nested.
class DeferredInit {
 public:
  DeferredInit();
  ~DeferredInit();
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;

 private:
  std::shared_ptr<DeferredRecord> record_;
};

/// A new parameter's tensor for a layer's constructor: at::empty(shape, options), or, while a DeferredInit records
/// on this thread, a deferred one that has the shape and dtype but holds no values.
at::Tensor new_parameter(at::IntArrayRef shape, const at::TensorOptions& options = {});

/// Runs `init` on `parameter` without gradient tracking, or records it when the parameter is deferred. `random`:
/// whether `init` draws from the default CPU generator. `init` must write every element (it is replayed on a fresh
/// tensor of the parameter's shape).
void initialize(const at::Tensor& parameter, std::function<void(at::Tensor&)> init, bool random);

/// Reads elements [offset, offset + numel) of a parameter's row-major flattening from where its values are kept (a
/// file), as a 1-D tensor of any dtype.
using PartReader = std::function<at::Tensor(int64_t offset, int64_t numel)>;

/// The parameter's values read by `read` (a pretrained file's tensor): now, or, when the parameter is deferred,
/// recorded like initialize(), so that a sharding strategy reads only each rank's part of it (read_part) and
/// materialize() reads it whole.
void initialize_from(const at::Tensor& parameter, PartReader read);

/// Elements [offset, offset + numel) of a parameter whose values materialize() left to be read by parts: valid inside
/// materialize()'s `ready` calls for the units holding it.
at::Tensor read_part(const at::Tensor& parameter, int64_t offset, int64_t numel);

/// Whether `parameter` holds no values yet (made under a DeferredInit and not materialized).
bool is_deferred(const at::Tensor& parameter);
/// Whether any parameter of `module` (or below it) is deferred.
bool has_deferred_parameters(const torch::nn::Module& module);

/// Moves `module`'s parameters and buffers that hold values to `device`, and marks its deferred parameters to be
/// materialized there (Module::to for a module with deferred parameters).
void to_device(torch::nn::Module& module, const c10::Device& device);

/// Gives every deferred parameter of `module` its values (see the top of this file). `units`: groups of the module's
/// parameters; `ready(u)` is called as soon as every parameter of units[u] holds its values (units without deferred
/// parameters first), so that the caller can shard and free them before the next ones are drawn: at most the
/// parameters of the units not yet ready are held whole at once. Every record the module's parameters come from is
/// replayed whole, so parameters outside `units` are materialized too. The default CPU generator's state is restored
/// afterwards. Throws std::invalid_argument naming the parameter when a record cannot be replayed exactly.
/// `by_parts`: a parameter of a unit whose values come from initialize_from is not filled but counts as ready, for
/// `ready` to read the parts it keeps (read_part); it stays without values afterwards.
void materialize(torch::nn::Module& module, const std::vector<std::vector<at::Tensor>>& units = {},
                 const std::function<void(size_t)>& ready = {}, bool by_parts = false);

/// The generator state each of `module`'s records starts from (as a uint8 tensor), to agree on across ranks, and
/// the setter for it (FSDP gives every rank rank 0's, so that all of them draw the same model).
std::vector<at::Tensor> deferred_generator_states(const torch::nn::Module& module);
void set_deferred_generator_states(const torch::nn::Module& module, const std::vector<at::Tensor>& states);

}  // namespace composer::nn
