// A minimal expected<T>: a value or an error message. Recoverable errors (files, network input,
// user input) travel as values; exceptions are kept for fatal setup. C++17 has no std::expected.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace es {

struct Error {
  std::string message;
};

inline Error makeError(std::string message) { return Error{std::move(message)}; }

// [[nodiscard]]: an ignored result is a dropped error (a warning; an error in CI, -Werror).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}      // NOLINT: implicit by design
  Expected(Error error) : state_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const std::string& error() const { return std::get<Error>(state_).message; }

 private:
  std::variant<T, Error> state_;
};

// Expected<void>: success or an error message.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error.message)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return *error_; }

 private:
  std::optional<std::string> error_;
};

using Status = Expected<void>;

}  // namespace es
