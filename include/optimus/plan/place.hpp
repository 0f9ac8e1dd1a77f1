// Where a layout's model trains: the 2D family's q x q grids or the 1D baseline's tensor-parallel groups, one value for
// either, so that a program running any layout does not branch on the family (build.hpp's build_any_gpt takes it).
//
//   plan::Place host = plan::Place::on_host(world, layout);        // Grid::create or megatron::Group::pipeline_stage
//   plan::Place there = plan::Place::on_device(rank, world, layout, {.shared = true, .timeout = t});
//   plan::AnyGpt<float> model = plan::build_any_gpt<float>(there.with(execution), config, layout);
#pragma once

#include <chrono>
#include <string>
#include <variant>

#include "optimus/device/rank_device.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/layers/megatron/group.hpp"
#include "optimus/plan/layout.hpp"

namespace optimus::plan {

// How the ranks of a job reach their device: all of `world`'s ranks (in-process) on one shared device, whose exchanges
// are staged on it (RankDevice::grid), or one device per rank with device communicators that abort an operation
// running longer than `timeout` (distributed_grid).
struct DevicePlacement {
  bool shared = false;
  std::chrono::milliseconds timeout;
};

class Place {
 public:
  // Collective over `world` (layout.ranks() ranks): the layout's grids (Grid::create(world, q, pp)) or groups
  // (megatron::Group::pipeline_stage(world, pp, dp)) on the host; optimus::Error naming the values where world's size
  // is not the layout's.
  static Place on_host(Communicator& world, const Layout& layout);
  // The same on `rank`'s device.
  static Place on_device(RankDevice& rank, Communicator& world, const Layout& layout, const DevicePlacement& how);

  // The same place executing as `execution` says (Grid::with, megatron::Group::with).
  Place with(const Execution& execution) const;
  // The grid its activations live on: the 2D grid, or the group's one-rank grid (its stage, pipe and replicas).
  const Grid& grid() const;
  // "a 2x2 grid", "the 1D baseline's groups of 4 ranks".
  std::string describe() const;
  // The model's shape on this place, named as the user gave it (validate_for_grid, validate_for_group).
  void validate(const GptConfig& config, const ConfigNames& names) const;

  // f(grid) or f(group): for what takes the family's place (a family's constructors, AdamW, the reference check).
  template <class F>
  decltype(auto) visit(F&& f) const {
    return std::visit(std::forward<F>(f), place_);
  }

 private:
  explicit Place(std::variant<Grid, megatron::Group> place) : place_(std::move(place)) {}
  std::variant<Grid, megatron::Group> place_;
};

}  // namespace optimus::plan
