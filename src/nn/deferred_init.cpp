#include "composer/nn/deferred_init.h"

#include "nn/detail/deferred_narrow.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

namespace composer::nn {

// One DeferredInit's record: where the generator stood, the parameters made, and their initializations in order.
struct DeferredRecord {
  struct Entry {
    at::Tensor target;
    std::function<void(at::Tensor&)> init;
    bool random = false;
    PartReader part;  // set by initialize_from
  };
  at::Tensor generator_state;
  std::vector<at::Tensor> params;                     // in the order made
  std::map<const c10::TensorImpl*, int64_t> version;  // each parameter's version counter when made
  std::vector<Entry> entries;
  bool drew_outside = false;  // the generator moved while recording: something drew outside initialize()
  c10::Device device = c10::Device(c10::kCPU);
  std::map<const c10::TensorImpl*, PartReader> by_parts;  // while materialize() leaves them to be read by parts
  struct Narrowed {  // detail::narrow_deferred: the whole shape drawn, and the part kept
    std::vector<int64_t> whole;
    std::function<at::Tensor(const at::Tensor&)> keep;
    detail::PartOfReader part_of;  // unset: a pretrained value is read whole, then cut
  };
  std::map<const c10::TensorImpl*, Narrowed> narrowed;
  // The shape `p`'s initializations draw: its whole shape when narrowed.
  std::vector<int64_t> drawn_shape(const at::Tensor& p) const {
    const auto it = narrowed.find(p.unsafeGetTensorImpl());
    return it == narrowed.end() ? p.sizes().vec() : it->second.whole;
  }
};

namespace {

thread_local std::shared_ptr<DeferredRecord> recording;

// Every deferred parameter's record, until materialized.
std::mutex registry_mutex;
std::map<const c10::TensorImpl*, std::shared_ptr<DeferredRecord>>& registry() {
  static std::map<const c10::TensorImpl*, std::shared_ptr<DeferredRecord>> records;
  return records;
}

std::shared_ptr<DeferredRecord> record_of(const at::Tensor& t) {
  if (!t.defined()) return nullptr;
  std::lock_guard<std::mutex> lock(registry_mutex);
  const auto it = registry().find(t.unsafeGetTensorImpl());
  return it == registry().end() ? nullptr : it->second;
}

at::Tensor generator_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Puts the generator where a record started and back where it was when the scope ends.
class GeneratorAt {
 public:
  explicit GeneratorAt(const at::Tensor& state) : saved_(generator_state()) { set_generator_state(state); }
  ~GeneratorAt() { set_generator_state(saved_); }
  GeneratorAt(const GeneratorAt&) = delete;
  GeneratorAt& operator=(const GeneratorAt&) = delete;

 private:
  at::Tensor saved_;
};

// Shape and dtype without the memory: every element a view of one zero (reads see zeros, writes fail).
at::Tensor deferred_view(at::IntArrayRef shape, const at::TensorOptions& options) {
  const at::Tensor one = at::zeros({1}, options.requires_grad(false));
  at::Tensor p = at::empty({0}, options.requires_grad(false));
  p.set_(one.storage(), 0, shape, std::vector<int64_t>(shape.size(), 0));
  return p;
}

using Names = std::map<const c10::TensorImpl*, std::string>;

std::string name_in(const Names& names, const at::Tensor& p) {
  const auto it = names.find(p.unsafeGetTensorImpl());
  return it == names.end() ? std::string("(a parameter of another module)") : "'" + it->second + "'";
}

// The checks that the record reproduces a normal build.
void check_replayable(const DeferredRecord& r, const Names& names) {
  if (r.drew_outside) {
    throw std::invalid_argument(
        "nn::materialize: random numbers were drawn outside nn::initialize while the model's initialization was "
        "deferred (a torch::nn layer or a torch::rand* call in a constructor), so its values cannot match a normal "
        "build; build that model without nn::DeferredInit");
  }
  for (const auto& p : r.params) {
    bool replaced = false;  // its data swapped (Module::to to another dtype, set_data): no longer the deferred view
    for (const int64_t s : p.strides()) replaced = replaced || s != 0;
    if (replaced || p.storage().nbytes() != static_cast<size_t>(p.element_size())) {
      throw std::invalid_argument("nn::materialize: parameter " + name_in(names, p) +
                                  " had its data replaced (Module::to, set_data) while its initialization was "
                                  "deferred; convert the model after it is materialized");
    }
    if (p._version() != r.version.at(p.unsafeGetTensorImpl())) {
      throw std::invalid_argument("nn::materialize: parameter " + name_in(names, p) +
                                  " was changed outside nn::initialize while its initialization was deferred; "
                                  "initialize it with nn::initialize, or build the model without nn::DeferredInit");
    }
  }
}

// Replays r (see the header): `done(p)` once p holds its values.
void replay(DeferredRecord& r, const Names& names, const std::function<void(const at::Tensor&)>& done,
            const std::set<const c10::TensorImpl*>& readable) {
  check_replayable(r, names);
  std::map<const c10::TensorImpl*, size_t> last;
  for (size_t i = 0; i < r.entries.size(); ++i) last[r.entries[i].target.unsafeGetTensorImpl()] = i;
  const auto fill = [&](const at::Tensor& p, const std::function<void(at::Tensor&)>* init) {
    at::Tensor value = at::empty(r.drawn_shape(p), p.options().device(c10::kCPU));
    if (init) (*init)(value);
    if (const auto n = r.narrowed.find(p.unsafeGetTensorImpl()); n != r.narrowed.end())
      value = n->second.keep(value).clone(at::MemoryFormat::Contiguous);  // the whole freed
    if (r.device != value.device()) value = value.to(r.device);
    at::Tensor target = p;
    target.set_data(value);
    {
      std::lock_guard<std::mutex> lock(registry_mutex);
      registry().erase(p.unsafeGetTensorImpl());
    }
    done(p);
  };
  // drawn_after[i]: a random initialization after entry i is kept, so the stream must advance through entry i's.
  std::vector<bool> drawn_after(r.entries.size() + 1, false);
  for (size_t i = r.entries.size(); i-- > 0;) {
    const DeferredRecord::Entry& e = r.entries[i];
    drawn_after[i] = drawn_after[i + 1] || (e.random && last.at(e.target.unsafeGetTensorImpl()) == i);
  }
  at::NoGradGuard no_grad;
  {
    GeneratorAt at_record(r.generator_state);
    for (size_t i = 0; i < r.entries.size(); ++i) {
      DeferredRecord::Entry& e = r.entries[i];
      if (last.at(e.target.unsafeGetTensorImpl()) == i) {
        const auto narrowed = r.narrowed.find(e.target.unsafeGetTensorImpl());
        const bool whole = narrowed == r.narrowed.end();
        if (e.part && readable.count(e.target.unsafeGetTensorImpl()) &&
            (whole || narrowed->second.part_of)) {  // left for the caller to read by parts
          r.by_parts[e.target.unsafeGetTensorImpl()] = whole ? e.part : narrowed->second.part_of(e.part);
          if (r.device != e.target.device()) {  // still without values, but on the device its values go to
            at::Tensor target = e.target;
            target.set_data(deferred_view(e.target.sizes(), e.target.options().device(r.device)));
          }
          done(e.target);
        } else {
          fill(e.target, &e.init);
        }
      } else if (e.random && drawn_after[i + 1]) {  // overwritten later: only advances the stream a later draw reads
        at::Tensor scratch = at::empty(r.drawn_shape(e.target), e.target.options().device(c10::kCPU));
        e.init(scratch);
      }
    }
  }
  for (const auto& p : r.params)  // made but never initialized: uninitialized memory, as at::empty
    if (!last.count(p.unsafeGetTensorImpl())) fill(p, nullptr);
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (const auto& [impl, reader] : r.by_parts) registry().erase(impl);
  }
  r.by_parts.clear();
  r.entries.clear();
  r.params.clear();
}

// The records `module`'s deferred parameters come from, in the order of their first parameter.
std::vector<std::shared_ptr<DeferredRecord>> records_of(const torch::nn::Module& module) {
  std::vector<std::shared_ptr<DeferredRecord>> records;
  std::set<const DeferredRecord*> seen;
  for (const auto& p : module.parameters(/*recurse=*/true)) {
    auto r = record_of(p);
    if (r && seen.insert(r.get()).second) records.push_back(std::move(r));
  }
  return records;
}

}  // namespace

DeferredInit::DeferredInit() {
  if (recording) throw std::logic_error("nn::DeferredInit: already recording on this thread (they do not nest)");
  record_ = std::make_shared<DeferredRecord>();
  record_->generator_state = generator_state();
  recording = record_;
}

DeferredInit::~DeferredInit() {
  recording = nullptr;
  try {
    record_->drew_outside = !at::equal(generator_state(), record_->generator_state);
  } catch (...) {
    record_->drew_outside = true;  // cannot tell: refuse to replay rather than risk other values
  }
}

at::Tensor new_parameter(at::IntArrayRef shape, const at::TensorOptions& options) {
  if (!recording) return at::empty(shape, options);
  at::Tensor p = deferred_view(shape, options);
  recording->params.push_back(p);
  recording->version[p.unsafeGetTensorImpl()] = p._version();
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[p.unsafeGetTensorImpl()] = recording;
  return p;
}

void initialize(const at::Tensor& parameter, std::function<void(at::Tensor&)> init, bool random) {
  if (auto r = record_of(parameter)) {
    r->entries.push_back({parameter, std::move(init), random, {}});
    return;
  }
  at::NoGradGuard no_grad;
  at::Tensor p = parameter;
  init(p);
}

void initialize_from(const at::Tensor& parameter, PartReader read) {
  if (auto r = record_of(parameter)) {
    auto init = [read](at::Tensor& t) { t.copy_(read(0, t.numel()).view(t.sizes())); };
    r->entries.push_back({parameter, std::move(init), false, std::move(read)});
    return;
  }
  at::NoGradGuard no_grad;
  at::Tensor p = parameter;
  p.copy_(read(0, p.numel()).view(p.sizes()));
}

at::Tensor read_part(const at::Tensor& parameter, int64_t offset, int64_t numel) {
  if (const auto r = record_of(parameter)) {
    const auto it = r->by_parts.find(parameter.unsafeGetTensorImpl());
    if (it != r->by_parts.end()) return it->second(offset, numel);
  }
  throw std::logic_error("nn::read_part: the parameter is not left to be read by parts (inside materialize)");
}

void detail::narrow_deferred(const at::Tensor& parameter, at::IntArrayRef local,
                             std::function<at::Tensor(const at::Tensor&)> keep, PartOfReader part_of) {
  const auto r = record_of(parameter);
  if (!r) throw std::logic_error("nn::detail::narrow_deferred: the parameter is not deferred");
  const c10::TensorImpl* impl = parameter.unsafeGetTensorImpl();
  DeferredRecord::Narrowed& n = r->narrowed[impl];
  if (n.keep) {
    n.keep = [first = std::move(n.keep), then = std::move(keep)](const at::Tensor& whole) {
      return then(first(whole));
    };
    n.part_of = n.part_of && part_of ? PartOfReader([first = std::move(n.part_of), then = std::move(part_of)](
                                                        PartReader whole) { return then(first(std::move(whole))); })
                                     : PartOfReader();
  } else {
    n.whole = parameter.sizes().vec();
    n.keep = std::move(keep);
    n.part_of = std::move(part_of);
  }
  at::Tensor p = parameter;
  p.set_data(deferred_view(local, parameter.options()));
  r->version[impl] = p._version();
}

bool is_deferred(const at::Tensor& parameter) { return record_of(parameter) != nullptr; }

bool has_deferred_parameters(const torch::nn::Module& module) {
  for (const auto& p : module.parameters(/*recurse=*/true))
    if (is_deferred(p)) return true;
  return false;
}

void to_device(torch::nn::Module& module, const c10::Device& device) {
  at::NoGradGuard no_grad;
  for (auto& p : module.parameters(/*recurse=*/true)) {
    if (auto r = record_of(p))
      r->device = device;
    else
      p.set_data(p.data().to(device));
  }
  for (auto& b : module.buffers(/*recurse=*/true)) b.set_data(b.data().to(device));
}

void materialize(torch::nn::Module& module, const std::vector<std::vector<at::Tensor>>& units,
                 const std::function<void(size_t)>& ready, bool by_parts) {
  Names names;
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    names.emplace(p.value().unsafeGetTensorImpl(), p.key());
  std::vector<int64_t> pending(units.size(), 0);
  std::map<const c10::TensorImpl*, std::vector<size_t>> units_of;
  for (size_t u = 0; u < units.size(); ++u) {
    for (const auto& p : units[u]) {
      if (!is_deferred(p)) continue;
      ++pending[u];
      units_of[p.unsafeGetTensorImpl()].push_back(u);
    }
  }
  for (size_t u = 0; u < units.size(); ++u)
    if (pending[u] == 0 && ready) ready(u);
  const auto done = [&](const at::Tensor& p) {
    const auto it = units_of.find(p.unsafeGetTensorImpl());
    if (it == units_of.end()) return;
    for (const size_t u : it->second)
      if (--pending[u] == 0 && ready) ready(u);
  };
  std::set<const c10::TensorImpl*> readable;  // the units' parameters, when read by parts
  if (by_parts)
    for (const auto& unit : units)
      for (const auto& p : unit) readable.insert(p.unsafeGetTensorImpl());
  for (const auto& r : records_of(module)) replay(*r, names, done, readable);
}

std::vector<at::Tensor> deferred_generator_states(const torch::nn::Module& module) {
  std::vector<at::Tensor> states;
  for (const auto& r : records_of(module)) states.push_back(r->generator_state);
  return states;
}

void set_deferred_generator_states(const torch::nn::Module& module, const std::vector<at::Tensor>& states) {
  const auto records = records_of(module);
  if (records.size() != states.size()) {
    throw std::invalid_argument("nn::set_deferred_generator_states: " + std::to_string(states.size()) + " states for " +
                                std::to_string(records.size()) + " records");
  }
  for (size_t i = 0; i < records.size(); ++i) records[i]->generator_state = states[i].clone();
}

}  // namespace composer::nn
