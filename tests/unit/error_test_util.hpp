#pragma once
// The message of the moeq::Error that f throws; a test failure when it throws none.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "moeq/error.hpp"

namespace moeq::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no moeq::Error thrown";
  return "";
}

}  // namespace moeq::test
