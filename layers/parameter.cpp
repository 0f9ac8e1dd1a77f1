// Initialization, loading and gathering of parameters through their Sharding.
#include "optimus/layers/parameter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "optimus/core/device_memory.hpp"
#include "optimus/core/error.hpp"

namespace optimus {

std::int64_t Sharding::local_rows() const {
  switch (kind) {
    case Kind::block: return rows / q;
    case Kind::rows: return rows / parts;
    case Kind::vector: return 1;
    case Kind::columns:
    case Kind::replicated: return rows;
  }
  return 0;
}

std::int64_t Sharding::local_cols() const {
  switch (kind) {
    case Kind::block: return cols / q;
    case Kind::vector: return cols / (q * q);
    case Kind::columns: return cols / parts;
    case Kind::rows:
    case Kind::replicated: return cols;
  }
  return 0;
}

std::int64_t FusedColumns::original_column(std::int64_t internal, std::int64_t groups) const {
  if (!fused()) return internal;
  std::int64_t block = 0;  // a group's columns
  for (const std::int64_t w : widths) block += w / groups;
  const std::int64_t group = internal / block;
  std::int64_t rem = internal % block, offset = 0;  // offset: the part's first global column
  for (const std::int64_t w : widths) {
    if (rem < w / groups) return offset + group * (w / groups) + rem;
    rem -= w / groups;
    offset += w;
  }
  return internal;  // unreachable for internal < the parts' total
}

std::int64_t Sharding::original_column(std::int64_t internal) const {
  return fused.original_column(internal, kind == Kind::columns ? parts : q);
}

std::pair<std::int64_t, std::int64_t> Sharding::global(std::int64_t lr, std::int64_t lc) const {
  switch (kind) {
    case Kind::block: return {i * local_rows() + lr, original_column(j * (cols / q) + lc)};
    case Kind::vector: return {0, original_column(j * (cols / q) + i * local_cols() + lc)};
    case Kind::columns: return {lr, original_column(part * local_cols() + lc)};
    case Kind::rows: return {part * local_rows() + lr, original_column(lc)};
    case Kind::replicated: return {lr, original_column(lc)};
  }
  return {0, 0};
}

Sharding Sharding::on_rank(int rank) const {
  Sharding other = *this;
  other.i = rank / q;
  other.j = rank % q;
  other.part = rank;
  return other;
}

namespace {

// This rank's shard as a host row-major [local_rows, local_cols] buffer, and written back, wherever it lives.
void copy_shard(void* dst, const void* src, std::size_t bytes, Device where, DeviceMemory* device,
                const std::string& name) {
  OPTIMUS_CHECK(where == Device::cpu || device != nullptr, "parameter '", name,
                "' lives on a device: pass the DeviceMemory it lives in (the grid's device())");
  copy_bytes(where == Device::cpu ? nullptr : device, dst, src, bytes);
}

template <class T>
std::vector<T> shard_to_host(const ParameterRef<T>& p, const TensorView<T>& shard, DeviceMemory* device) {
  std::vector<T> host(static_cast<std::size_t>(shard.numel()));
  copy_shard(host.data(), shard.data(), host.size() * sizeof(T), shard.device(), device, p.name);
  return host;
}

template <class T>
void shard_from_host(const ParameterRef<T>& p, const std::vector<T>& host, DeviceMemory* device) {
  if (p.compute != nullptr) p.compute->invalidate();  // its bf16 copy is cast again before it is used
  copy_shard(p.value.data(), host.data(), host.size() * sizeof(T), p.value.device(), device, p.name);
}

}  // namespace

template <class T>
void init_parameter(const ParameterRef<T>& p, const GptConfig& config, DeviceMemory* device) {
  const CounterRng rng(config.seed, parameter_stream(p.name));
  const Distribution dist = initial_distribution(config, p.name);
  const std::int64_t lc = p.layout.local_cols();
  std::vector<T> host(static_cast<std::size_t>(p.layout.local_rows() * lc));
  for (std::int64_t r = 0; r < p.layout.local_rows(); ++r) {
    for (std::int64_t c = 0; c < lc; ++c) {
      const auto [gr, gc] = p.layout.global(r, c);
      host[static_cast<std::size_t>(r * lc + c)] =
          p.layout.is_padding(gr, gc)
              ? T(0)
              : static_cast<T>(dist.sample(rng, static_cast<std::uint64_t>(gr), static_cast<std::uint64_t>(gc)));
    }
  }
  shard_from_host(p, host, device);
}

template <class T>
void load_parameter(const ParameterRef<T>& p, const GlobalMatrix& full, DeviceMemory* device) {
  OPTIMUS_CHECK(full.rows() == p.layout.tensor_rows() && full.cols() == p.layout.tensor_cols(), "load_global: '",
                p.name, "' is ", p.layout.tensor_rows(), "x", p.layout.tensor_cols(), " but the given tensor is ",
                full.rows(), "x", full.cols());
  // The whole tensor, which every rank holds (the same error everywhere), finite as T holds it: an f64 value past
  // float's range would become inf in an f32 model.
  const double largest = static_cast<double>(std::numeric_limits<T>::max());
  if (!full.allFinite() || full.cwiseAbs().maxCoeff() > largest) {
    for (std::int64_t r = 0; r < full.rows(); ++r) {
      for (std::int64_t c = 0; c < full.cols(); ++c) {
        OPTIMUS_CHECK(std::isfinite(full(r, c)), "load_global: '", p.name, "' holds ", full(r, c), " at [", r, ", ", c,
                      "]; parameters must be finite");
        OPTIMUS_CHECK(std::abs(full(r, c)) <= largest, "load_global: '", p.name, "' holds ", full(r, c), " at [", r,
                      ", ", c, "], beyond the model's ", sizeof(T) == 4 ? "f32" : "f64", " range (", largest,
                      "); parameters must be finite as the model holds them");
      }
    }
  }
  const std::int64_t lc = p.layout.local_cols();
  std::vector<T> host(static_cast<std::size_t>(p.layout.local_rows() * lc));
  for (std::int64_t r = 0; r < p.layout.local_rows(); ++r) {
    for (std::int64_t c = 0; c < lc; ++c) {
      const auto [gr, gc] = p.layout.global(r, c);
      host[static_cast<std::size_t>(r * lc + c)] = p.layout.is_padding(gr, gc) ? T(0) : static_cast<T>(full(gr, gc));
    }
  }
  shard_from_host(p, host, device);
}

template <class T>
GlobalMatrix gather_parameter(Communicator& comm, const ParameterRef<T>& p, bool gradient, DeviceMemory* device) {
  const std::vector<T> mine = shard_to_host(p, gradient ? p.grad : p.value, device);
  const std::int64_t lr = p.layout.local_rows(), lc = p.layout.local_cols(), n = lr * lc;
  const int ranks = comm.size();
  std::vector<T> all(static_cast<std::size_t>(n * ranks));
  comm.all_gather(mine.data(), all.data(), static_cast<std::size_t>(n), dtype_of<T>);
  GlobalMatrix full(p.layout.tensor_rows(), p.layout.tensor_cols());  // without padding
  for (int rank = 0; rank < ranks; ++rank) {
    const Sharding there = p.layout.on_rank(rank);
    const T* block = all.data() + static_cast<std::ptrdiff_t>(rank) * n;
    for (std::int64_t r = 0; r < lr; ++r) {
      for (std::int64_t c = 0; c < lc; ++c) {
        const auto [gr, gc] = there.global(r, c);
        if (!p.layout.is_padding(gr, gc)) full(gr, gc) = static_cast<double>(block[r * lc + c]);
      }
    }
  }
  return full;
}

template <class T>
void load_named(const std::vector<ParameterRef<T>>& params, const std::map<std::string, GlobalMatrix>& tensors,
                DeviceMemory* device) {
  for (const auto& [given, full] : tensors) {
    const std::string& name = given;  // (a structured binding: clang 14 does not capture it)
    auto it = std::find_if(params.begin(), params.end(), [&](const ParameterRef<T>& p) { return p.name == name; });
    OPTIMUS_CHECK(it != params.end(), "load_global: unknown parameter '", name, "'");
    const bool vector_as_column = it->shape.size() == 1 && full.cols() == 1 && full.rows() == it->layout.tensor_cols();
    load_parameter(*it, vector_as_column ? GlobalMatrix(full.transpose()) : full, device);
  }
}

template <class T>
std::map<std::string, GlobalMatrix> gather_named(Communicator& comm, const std::vector<ParameterRef<T>>& params,
                                                 bool gradients, DeviceMemory* device) {
  std::map<std::string, GlobalMatrix> out;
  for (const ParameterRef<T>& p : params) out[p.name] = gather_parameter(comm, p, gradients, device);
  return out;
}

template <class T>
void scale_gradient(const ParameterRef<T>& p, T factor, const ops::Queue& queue) {
  const TensorView<T> g(p.grad.data(), Shape{1, p.grad.numel()}, p.grad.device());
  ops::axpby<T>(factor, g, T(0), g, queue);
}

#define OPTIMUS_INSTANTIATE(T)                                                       \
  template void init_parameter<T>(const ParameterRef<T>&, const GptConfig&, DeviceMemory*);         \
  template void load_parameter<T>(const ParameterRef<T>&, const GlobalMatrix&, DeviceMemory*);      \
  template GlobalMatrix gather_parameter<T>(Communicator&, const ParameterRef<T>&, bool, DeviceMemory*);    \
  template void load_named<T>(const std::vector<ParameterRef<T>>&, const std::map<std::string, GlobalMatrix>&,  \
                              DeviceMemory*);                                                                  \
  template std::map<std::string, GlobalMatrix> gather_named<T>(Communicator&, const std::vector<ParameterRef<T>>&, \
                                                               bool, DeviceMemory*);                       \
  template void scale_gradient<T>(const ParameterRef<T>&, T, const ops::Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus
