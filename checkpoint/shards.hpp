// Internal to the checkpoint module: sharded tensors written as rectangles of their global tensors, and read back
// under any other sharding, with chunk checksums.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optimus/checkpoint/checkpoint.hpp"
#include "optimus/checkpoint/safetensors.hpp"
#include "optimus/layers/parameter.hpp"

namespace optimus::checkpoint::detail {

constexpr std::uint64_t chunk_bytes = 1 << 20;  // one checksum per MiB of a rectangle's bytes

// A rectangle of a rows x cols global tensor that a rank holds: global rows [row0, row0 + rows) and columns
// [col0, col0 + cols), stored in the rank's local columns [local_col0, local_col0 + cols) of all its local rows.
struct Box {
  std::int64_t row0 = 0, col0 = 0, rows = 0, cols = 0, local_col0 = 0;
};
// The rectangles of a shard layout, in local column order (one, or three for c_attn's head-grouped columns).
std::vector<Box> boxes_of(const Sharding& layout);

// One rank's part of one tensor of a checkpoint. `key` is unique in the checkpoint ("model/wte.weight",
// "adam.m/wte.weight"); shape is the global shape as the model names it; data is the local
// [layout.local_rows(), layout.local_cols()] row-major shard in `device` (null: host memory).
struct Shard {
  std::string key;
  std::vector<std::int64_t> shape;
  Sharding layout;
  DType dtype = DType::f32;
  void* data = nullptr;
  DeviceMemory* device = nullptr;
};

std::string hex(std::uint64_t value);
std::uint64_t xxh3(const void* data, std::size_t bytes);
// "F32" / "F64" for f32 / f64 (the only types shards are saved in).
std::string safetensors_dtype(DType dtype);

// Writes this rank's shards to `file` (one rectangle per safetensors tensor) and returns their description for
// metadata.json: {"file": {...}, "tensors": {key: [rectangle, ...]}}.
nlohmann::json write_shards(const std::filesystem::path& file, const std::vector<Shard>& shards, IoStats& stats);

// Every rank's `mine` on every rank of `comm`, in rank order (padded to one length and all-gathered).
std::vector<nlohmann::json> gather_json(Communicator& comm, const nlohmann::json& mine);

// metadata.json: the body and its checksum; read() verifies both and throws naming the file.
void write_metadata(const std::filesystem::path& file, const nlohmann::json& body);
nlohmann::json read_metadata(const std::filesystem::path& dir);

// Reads every shard's local elements from the checkpoint in `dir` (described by `body`): each saved rectangle that
// intersects one of the shard's, in verified chunks. Throws naming the file on any damage or a gap in coverage.
void read_shards(const std::filesystem::path& dir, const nlohmann::json& body, const std::vector<Shard>& shards,
                 IoStats& stats);

}  // namespace optimus::checkpoint::detail
