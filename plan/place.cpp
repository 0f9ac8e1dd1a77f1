// Where a layout's model trains (place.hpp).
#include "optimus/plan/place.hpp"

#include <memory>
#include <utility>

#include "optimus/comm/device_communicator.hpp"
#include "optimus/core/error.hpp"

namespace optimus::plan {
namespace {

void check_world(const Communicator& world, const Layout& layout) {
  OPTIMUS_CHECK(world.size() == layout.ranks(), "the layout ", describe(layout), " needs ", layout.ranks(),
                " ranks (dp x pp x ", layout.two_d() ? "q^2" : "p", "), the world has ",
                world.size());
}

}  // namespace

Place Place::on_host(Communicator& world, const Layout& layout) {
  check_world(world, layout);
  if (layout.tensor == TensorParallel::one_d) {
    return Place(megatron::Group::pipeline_stage(world, layout.pp, layout.dp));
  }
  return Place(Grid::create(world, layout.q(), layout.pp));
}

Place Place::on_device(RankDevice& rank, Communicator& world, const Layout& layout, const DevicePlacement& how) {
  check_world(world, layout);
  if (layout.two_d()) {
    return Place(how.shared ? rank.grid(world, layout.q(), layout.pp)
                            : distributed_grid(rank, world, layout.q(), layout.pp, how.timeout));
  }
  // The 1D baseline's groups split their own communicators: from `world` staging its exchanges on the shared device,
  // or from a world of device communicators (the splits outlive it).
  std::unique_ptr<DeviceCommunicator> on_devices;
  if (how.shared) {
    rank.stage_on_device(world);
  } else {
    on_devices = device_world(rank, world, how.timeout);
  }
  megatron::Group group = megatron::Group::pipeline_stage(on_devices ? *on_devices : world, layout.pp, layout.dp);
  group.place_on(&rank.memory(), rank.queue());
  return Place(std::move(group));
}

Place Place::with(const Execution& execution) const {
  return visit([&](const auto& place) { return Place(place.with(execution)); });
}

const Grid& Place::grid() const {
  if (const auto* group = std::get_if<megatron::Group>(&place_)) return group->local();
  return std::get<Grid>(place_);
}

std::string Place::describe() const {
  if (const auto* group = std::get_if<megatron::Group>(&place_)) {
    return "the 1D baseline's groups of " + std::to_string(group->size()) + " ranks";
  }
  const int q = std::get<Grid>(place_).q();
  return "a " + std::to_string(q) + "x" + std::to_string(q) + " grid";
}

void Place::validate(const GptConfig& config, const ConfigNames& names) const {
  if (const auto* group = std::get_if<megatron::Group>(&place_)) {
    validate_for_group(config, group->size(), names);
  } else {
    validate_for_grid(config, std::get<Grid>(place_).q(), names);
  }
}

}  // namespace optimus::plan
