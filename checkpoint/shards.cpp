// Sharded tensors in and out of a checkpoint directory: rectangles, chunk checksums, metadata.json.
#include "checkpoint/shards.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "optimus/core/device_memory.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::checkpoint::detail {

namespace fs = std::filesystem;

std::vector<Box> boxes_of(const Sharding& layout) {
  const std::int64_t lr = layout.local_rows(), lc = layout.local_cols();
  std::vector<Box> boxes;
  if (lr == 0 || lc == 0) return boxes;
  const std::int64_t row0 = layout.global(0, 0).first;
  OPTIMUS_CHECK(layout.global(lr - 1, 0).first == row0 + lr - 1, "checkpoint: a shard whose rows are not contiguous");
  const std::int64_t rows = std::min(lr, layout.tensor_rows() - row0);  // padding rows are not saved
  if (rows <= 0) return boxes;
  std::int64_t previous = -2;
  for (std::int64_t c = 0; c < lc; ++c) {
    const std::int64_t gc = layout.global(0, c).second;
    if (gc >= layout.tensor_cols()) continue;  // padding columns are not saved either
    if (gc != previous + 1) {
      boxes.push_back({.row0 = row0, .col0 = gc, .rows = rows, .cols = 0, .local_col0 = c});
    }
    ++boxes.back().cols;
    previous = gc;
  }
  return boxes;
}

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::uint64_t xxh3(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

std::string safetensors_dtype(DType dtype) {
  OPTIMUS_CHECK(dtype == DType::f32 || dtype == DType::f64, "checkpoint: shards are f32 or f64, not ",
                name_of(dtype));
  return dtype == DType::f32 ? "F32" : "F64";
}

namespace {

std::size_t element_bytes(const Shard& s) { return size_of(s.dtype); }

// The shard as a host buffer (copied from its device where it lives on one).
std::vector<char> to_host(const Shard& s) {
  std::vector<char> host(static_cast<std::size_t>(s.layout.local_rows() * s.layout.local_cols()) * element_bytes(s));
  copy_bytes(s.device, host.data(), s.data, host.size());
  return host;
}

std::string stored_name(const std::string& key, std::size_t box, std::size_t boxes) {
  return boxes == 1 ? key : key + "#" + std::to_string(box);
}

}  // namespace

nlohmann::json write_shards(const fs::path& file, const std::vector<Shard>& shards, IoStats& stats) {
  std::vector<safetensors::TensorInfo> infos;
  for (const Shard& s : shards) {
    const std::vector<Box> boxes = boxes_of(s.layout);
    for (std::size_t b = 0; b < boxes.size(); ++b) {
      infos.push_back({.name = stored_name(s.key, b, boxes.size()),
                       .dtype = safetensors_dtype(s.dtype),
                       .shape = {boxes[b].rows, boxes[b].cols}});
    }
  }
  safetensors::Writer writer(file.string(), infos, {{"format", "optimus-checkpoint-shard"}});
  nlohmann::json tensors = nlohmann::json::object();
  std::size_t k = 0;
  for (const Shard& s : shards) {
    const std::vector<char> host = to_host(s);
    const std::vector<Box> boxes = boxes_of(s.layout);
    const std::size_t e = element_bytes(s), row_bytes = static_cast<std::size_t>(s.layout.local_cols()) * e;
    for (std::size_t b = 0; b < boxes.size(); ++b, ++k) {
      const Box& box = boxes[b];
      std::vector<char> bytes(static_cast<std::size_t>(box.rows * box.cols) * e);
      const std::size_t box_row = static_cast<std::size_t>(box.cols) * e;
      for (std::int64_t r = 0; r < box.rows; ++r) {
        std::memcpy(bytes.data() + static_cast<std::size_t>(r) * box_row,
                    host.data() + static_cast<std::size_t>(r) * row_bytes + static_cast<std::size_t>(box.local_col0) * e,
                    box_row);
      }
      nlohmann::json chunks = nlohmann::json::array();
      for (std::size_t at = 0; at < bytes.size(); at += chunk_bytes) {
        chunks.push_back(hex(xxh3(bytes.data() + at, std::min<std::size_t>(chunk_bytes, bytes.size() - at))));
      }
      writer.append(bytes.data(), bytes.size());
      nlohmann::json& entry = tensors[s.key];
      if (entry.is_null()) entry = {{"shape", s.shape}, {"dtype", infos[k].dtype}, {"boxes", nlohmann::json::array()}};
      entry["boxes"].push_back({{"name", infos[k].name},
                                {"offset", writer.file_offset(k)},
                                {"row0", box.row0},
                                {"col0", box.col0},
                                {"rows", box.rows},
                                {"cols", box.cols},
                                {"chunks", std::move(chunks)}});
    }
  }
  writer.finish();
  stats.bytes_written += writer.file_bytes();
  return {{"file",
           {{"name", file.filename().string()},
            {"bytes", writer.file_bytes()},
            {"header_xxh3", hex(xxh3(writer.header().data(), writer.header().size()))}}},
          {"tensors", std::move(tensors)}};
}

void write_metadata(const fs::path& file, const nlohmann::json& body) {
  const std::string text = body.dump();
  const nlohmann::json whole = {{"body", body}, {"xxh3", hex(xxh3(text.data(), text.size()))}};
  const std::string out = whole.dump(1) + "\n";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  OPTIMUS_CHECK(fd >= 0, "cannot create '", file.string(), "': ", std::strerror(errno));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::write(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      OPTIMUS_FAIL("cannot write '", file.string(), "': ", std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  OPTIMUS_CHECK(::close(fd) == 0 && synced, "cannot fsync '", file.string(), "': ", std::strerror(errno));
}

nlohmann::json read_metadata(const fs::path& dir) {
  OPTIMUS_CHECK(fs::is_directory(dir), "checkpoint '", dir.string(), "' does not exist (no such directory)");
  const fs::path file = dir / "metadata.json";
  OPTIMUS_CHECK(fs::exists(file), "checkpoint '", dir.string(), "' is incomplete: it has no metadata.json (a save "
                "that did not finish, or not a checkpoint)");
  check_regular_input(file, "checkpoint '" + dir.string() + "'");
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  OPTIMUS_CHECK(in.is_open() && !in.bad(), "cannot read '", file.string(), "'");
  const nlohmann::json whole = nlohmann::json::parse(text, nullptr, false);
  const bool shaped = whole.is_object() && whole.contains("body") && whole.contains("xxh3") && whole["xxh3"].is_string();
  OPTIMUS_CHECK(shaped, "'", file.string(), "' is damaged: not the JSON of a checkpoint's metadata");
  const std::string body = whole["body"].dump();
  OPTIMUS_CHECK(hex(xxh3(body.data(), body.size())) == whole["xxh3"].get<std::string>(), "'", file.string(),
                "' is damaged: its checksum does not match its contents");
  return whole["body"];
}

namespace {

// The checkpoint's files, opened on first use and checked against their recorded size and header checksum.
class Files {
 public:
  Files(const fs::path& dir, const nlohmann::json& list) : dir_(dir), list_(list) {}

  const safetensors::Reader& get(std::size_t index, IoStats& stats) {
    auto it = open_.find(index);
    if (it != open_.end()) return it->second;
    const nlohmann::json& entry = list_.at(index);
    const fs::path path = dir_ / entry.at("name").get<std::string>();
    OPTIMUS_CHECK(fs::exists(path), "checkpoint '", dir_.string(), "' is incomplete: '", path.string(),
                  "' is missing");
    check_regular_input(path, "checkpoint '" + dir_.string() + "'");
    const auto expected = entry.at("bytes").get<std::uint64_t>();
    const auto actual = static_cast<std::uint64_t>(fs::file_size(path));
    OPTIMUS_CHECK(actual == expected, "'", path.string(), "' is damaged: ", actual, " bytes, but ", expected,
                  " were written (truncated?)");
    // The header's checksum before its JSON is trusted.
    std::ifstream in(path, std::ios::binary);
    unsigned char length[8] = {};
    in.read(reinterpret_cast<char*>(length), 8);
    std::uint64_t n = 0;
    for (int b = 7; b >= 0; --b) n = (n << 8) | length[b];
    OPTIMUS_CHECK(in.good() && n <= actual - 8, "'", path.string(), "' is damaged: its header's length is wrong");
    std::string header(reinterpret_cast<char*>(length), 8);
    header.resize(8 + n);
    in.read(header.data() + 8, static_cast<std::streamsize>(n));
    OPTIMUS_CHECK(in.good() && hex(xxh3(header.data(), header.size())) == entry.at("header_xxh3").get<std::string>(),
                  "'", path.string(), "' is damaged: its header's checksum does not match");
    stats.bytes_read += header.size();
    return open_.emplace(index, safetensors::Reader(path.string())).first->second;
  }

 private:
  fs::path dir_;
  const nlohmann::json& list_;
  std::map<std::size_t, safetensors::Reader> open_;
};

template <class To>
void convert(const char* src, std::size_t saved_bytes, To* dst) {
  if (saved_bytes == sizeof(float)) {
    float v;
    std::memcpy(&v, src, sizeof v);
    *dst = static_cast<To>(v);
  } else {
    double v;
    std::memcpy(&v, src, sizeof v);
    *dst = static_cast<To>(v);
  }
}

struct Overlap {
  Box mine;
  std::int64_t r0, r1, c0, c1;  // global rows [r0, r1), columns [c0, c1)
};

// Where this rank's rectangles `mine` overlap a saved one.
std::vector<Overlap> overlaps_of(const std::vector<Box>& mine, const Box& there) {
  std::vector<Overlap> overlaps;
  for (const Box& m : mine) {
    const Overlap o{.mine = m,
                    .r0 = std::max(m.row0, there.row0),
                    .r1 = std::min(m.row0 + m.rows, there.row0 + there.rows),
                    .c0 = std::max(m.col0, there.col0),
                    .c1 = std::min(m.col0 + m.cols, there.col0 + there.cols)};
    if (o.r0 < o.r1 && o.c0 < o.c1) overlaps.push_back(o);
  }
  return overlaps;
}

// The elements of a shard no checkpoint holds, which count as covered: its padding rows (wte's padded vocabulary) and
// padding columns, left zero.
std::int64_t padding_of(const Shard& s) {
  const std::int64_t local_cols = s.layout.local_cols();
  const std::int64_t first_row = s.layout.local_rows() > 0 ? s.layout.global(0, 0).first : 0;
  std::int64_t filled =
      std::clamp<std::int64_t>(first_row + s.layout.local_rows() - s.layout.tensor_rows(), 0, s.layout.local_rows()) *
      local_cols;
  for (std::int64_t c = 0; c < local_cols && s.layout.local_rows() > 0; ++c) {
    if (s.layout.global(0, c).second >= s.layout.tensor_cols()) {
      filled += std::min(s.layout.local_rows(), std::max<std::int64_t>(s.layout.tensor_rows() - first_row, 0));
    }
  }
  return filled;
}

// Where global element (gr, gc) lies in a saved rectangle `there` of elements of `saved_e` bytes: its byte offset.
std::uint64_t byte_in(const Box& there, std::int64_t gr, std::int64_t gc, std::uint64_t saved_e) {
  return static_cast<std::uint64_t>((gr - there.row0) * there.cols + (gc - there.col0)) * saved_e;
}

// A saved rectangle's bytes that `overlaps` need: whole checksummed chunks, from the chunk holding the first needed
// byte, each verified. `saved_e`: its elements' bytes.
struct SavedBytes {
  std::vector<char> bytes;
  std::uint64_t begin = 0;  // the rectangle's byte that bytes[0] holds
};

SavedBytes read_verified(const nlohmann::json& box, const Box& there, const std::vector<Overlap>& overlaps,
                         std::uint64_t saved_e, Files& files, IoStats& stats) {
  std::uint64_t first = UINT64_MAX, last = 0;  // bytes [first, last) of the saved rectangle are needed
  for (const Overlap& o : overlaps) {
    first = std::min(first, byte_in(there, o.r0, o.c0, saved_e));
    last = std::max(last, byte_in(there, o.r1 - 1, o.c1 - 1, saved_e) + saved_e);
  }
  const std::uint64_t total = static_cast<std::uint64_t>(there.rows * there.cols) * saved_e;
  const std::uint64_t begin = first / chunk_bytes * chunk_bytes,
                      end = std::min(total, (last + chunk_bytes - 1) / chunk_bytes * chunk_bytes);
  const safetensors::Reader& reader = files.get(box.at("file").get<std::size_t>(), stats);
  SavedBytes out{.bytes = std::vector<char>(end - begin), .begin = begin};
  reader.read(box.at("offset").get<std::uint64_t>() + begin, out.bytes.size(), out.bytes.data());
  stats.bytes_read += out.bytes.size();
  const nlohmann::json& chunks = box.at("chunks");
  for (std::uint64_t at = begin; at < end; at += chunk_bytes) {
    const std::uint64_t n = std::min(chunk_bytes, end - at);
    OPTIMUS_CHECK(hex(xxh3(out.bytes.data() + (at - begin), n)) == chunks.at(at / chunk_bytes).get<std::string>(),
                  "'", reader.path(), "' is damaged: tensor '", box.at("name").get<std::string>(),
                  "' fails its checksum in bytes [", at, ", ", at + n, ")");
    ++stats.chunks_verified;
  }
  return out;
}

// The overlaps' elements of a saved rectangle `there` (its bytes `saved`, elements of `saved_e` bytes) into the
// shard's host copy `host`, converted to the shard's type where it differs; returns the elements placed.
std::int64_t place(const Shard& s, const Box& there, const std::vector<Overlap>& overlaps, const SavedBytes& saved,
                   std::uint64_t saved_e, std::vector<char>& host) {
  const std::int64_t local_cols = s.layout.local_cols();
  const std::size_t e = size_of(s.dtype);
  const auto at = [&](std::int64_t gr, std::int64_t gc) {
    return saved.bytes.data() + (byte_in(there, gr, gc, saved_e) - saved.begin);
  };
  std::int64_t placed = 0;
  for (const Overlap& o : overlaps) {
    // Global element (gr, gc)'s index in the shard's local [rows, local_cols] block.
    const auto local_of = [&](std::int64_t gr, std::int64_t gc) {
      return static_cast<std::size_t>((gr - o.mine.row0) * local_cols + o.mine.local_col0 + (gc - o.mine.col0));
    };
    for (std::int64_t gr = o.r0; gr < o.r1; ++gr) {
      if (saved_e == e) {  // the same type: the row's run of columns as it is
        std::memcpy(host.data() + local_of(gr, o.c0) * e, at(gr, o.c0), static_cast<std::size_t>(o.c1 - o.c0) * e);
        continue;
      }
      for (std::int64_t gc = o.c0; gc < o.c1; ++gc) {
        const std::size_t local = local_of(gr, gc);
        if (s.dtype == DType::f32) convert(at(gr, gc), saved_e, reinterpret_cast<float*>(host.data()) + local);
        else convert(at(gr, gc), saved_e, reinterpret_cast<double*>(host.data()) + local);
      }
    }
    placed += (o.r1 - o.r0) * (o.c1 - o.c0);
  }
  return placed;
}

// One shard from the checkpoint's saved rectangles that overlap it, checked to cover it whole.
void read_shard(const fs::path& dir, const nlohmann::json& tensors, const Shard& s, Files& files, IoStats& stats) {
  OPTIMUS_CHECK(tensors.contains(s.key), "checkpoint '", dir.string(), "' has no tensor '", s.key, "'");
  const nlohmann::json& saved = tensors.at(s.key);
  const auto shape = saved.at("shape").get<std::vector<std::int64_t>>();
  OPTIMUS_CHECK(shape == s.shape, "checkpoint '", dir.string(), "': '", s.key, "' has another shape there");
  const std::int64_t local_cols = s.layout.local_cols();
  std::vector<char> host(static_cast<std::size_t>(s.layout.local_rows() * local_cols) * size_of(s.dtype));
  std::int64_t filled = padding_of(s);
  const std::vector<Box> mine = boxes_of(s.layout);
  for (const nlohmann::json& box : saved.at("boxes")) {
    const Box there{.row0 = box.at("row0"), .col0 = box.at("col0"), .rows = box.at("rows"), .cols = box.at("cols"),
                    .local_col0 = 0};
    const std::vector<Overlap> overlaps = overlaps_of(mine, there);
    if (overlaps.empty()) continue;
    const auto saved_e = static_cast<std::uint64_t>(safetensors::element_size(saved.at("dtype").get<std::string>()));
    const SavedBytes bytes = read_verified(box, there, overlaps, saved_e, files, stats);
    filled += place(s, there, overlaps, bytes, saved_e, host);
  }
  OPTIMUS_CHECK(filled == s.layout.local_rows() * local_cols, "checkpoint '", dir.string(), "': the saved pieces of '",
                s.key, "' cover ", filled, " of this rank's ", s.layout.local_rows() * local_cols, " elements");
  copy_bytes(s.device, s.data, host.data(), host.size());
}

}  // namespace

void read_shards(const fs::path& dir, const nlohmann::json& body, const std::vector<Shard>& shards, IoStats& stats) {
  Files files(dir, body.at("files"));
  const nlohmann::json& tensors = body.at("tensors");
  for (const Shard& s : shards) read_shard(dir, tensors, s, files, stats);
}

std::vector<nlohmann::json> gather_json(Communicator& comm, const nlohmann::json& mine) {
  const std::string text = mine.dump();
  const double longest = comm.all_reduce(static_cast<double>(text.size()), ReduceOp::max);
  std::vector<std::uint8_t> padded(static_cast<std::size_t>(longest), ' ');
  std::copy(text.begin(), text.end(), padded.begin());
  std::vector<std::uint8_t> all(padded.size() * static_cast<std::size_t>(comm.size()));
  comm.all_gather(padded.data(), all.data(), padded.size(), DType::u8);
  std::vector<nlohmann::json> out;
  for (int r = 0; r < comm.size(); ++r) {
    const auto* begin = all.data() + static_cast<std::size_t>(r) * padded.size();
    out.push_back(nlohmann::json::parse(begin, begin + padded.size()));
  }
  return out;
}

}  // namespace optimus::checkpoint::detail
