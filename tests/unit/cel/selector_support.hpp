#pragma once
// Builders for the CEL selector tests: devices as a ResourceSlice would describe them, and one
// call that compiles and evaluates an expression into a short verdict for table tests.

#include <catch2/catch.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "libcore/cel/cel.hpp"

namespace kc::cel::test {

class DeviceBuilder {
 public:
  explicit DeviceBuilder(std::string driver) { device_.driver = std::move(driver); }

  // Attribute and capacity names as in a ResourceSlice: "id" (the driver's domain) or
  // "domain/id".
  DeviceBuilder& attr(std::string_view name, AttributeValue value) {
    setAttribute(device_, name, std::move(value));
    return *this;
  }
  DeviceBuilder& str(std::string_view name, std::string value) {
    return attr(name, std::move(value));
  }
  DeviceBuilder& integer(std::string_view name, std::int64_t value) { return attr(name, value); }
  DeviceBuilder& boolean(std::string_view name, bool value) { return attr(name, value); }
  DeviceBuilder& version(std::string_view name, std::string_view text) {
    auto v = Version::parse(text);
    REQUIRE(v.ok());
    return attr(name, *v);
  }
  DeviceBuilder& capacity(std::string_view name, std::string_view quantity) {
    auto q = Quantity::parse(quantity);
    REQUIRE(q.ok());
    setCapacity(device_, name, *q);
    return *this;
  }
  DeviceBuilder& multipleAllocations(bool allow) {
    device_.allowMultipleAllocations = allow;
    return *this;
  }

  Device build() const { return device_; }

 private:
  Device device_;
};

inline DeviceBuilder makeDevice(std::string driver) {
  return DeviceBuilder(std::move(driver));
}

// "true", "false" or "error: <message>"; "compile error: <message>" if it does not compile.
inline std::string verdict(std::string_view expression, const Device& device) {
  const auto program = compile(expression);
  if (!program) {
    return "compile error: " + program.error().message;
  }
  const Outcome o = evaluate(*program, device);
  switch (o.kind) {
    case Outcome::Kind::kTrue:
      return "true";
    case Outcome::Kind::kFalse:
      return "false";
    default:
      return "error: " + o.error;
  }
}

// `expected` is "true", "false", or "error: <a fragment of the message>".
inline void checkVerdict(const std::string& expression, const std::string& expected,
                         const Device& device) {
  CAPTURE(expression);
  const std::string got = verdict(expression, device);
  if (expected.starts_with("error: ")) {
    CHECK_THAT(got, Catch::Matchers::StartsWith("error: ") &&
                        Catch::Matchers::Contains(expected.substr(7)));
  } else {
    CHECK(got == expected);
  }
}

}  // namespace kc::cel::test
