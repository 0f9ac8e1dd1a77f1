// CAPTURE_BINDING(x): doctest's CAPTURE(x) for a structured binding x, which clang before 16 cannot capture in the
// lambda CAPTURE makes (C++20 allows it; Debian 12's clang 14 refuses it). The binding is captured through a
// reference to it, and reads as CAPTURE's does: "x := value".
#pragma once

#include <doctest/doctest.h>

#define CAPTURE_BINDING(x)         \
  const auto& x##_bound = (x);     \
  INFO(#x " := ", x##_bound)
