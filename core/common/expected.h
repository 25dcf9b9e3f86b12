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
  // This machine failed (a file would not open or read: EIO, EMFILE, deleted under us; memory), not
  // the input: a peer's verified bytes that we cannot read are never that peer's fault (issue 37 item 8).
  bool local = false;
};

inline Error makeError(std::string message) { return Error{std::move(message)}; }
inline Error localError(std::string message) { return Error{std::move(message), true}; }
// The same failure, said with more context in front (whose side it is stays).
inline Error withContext(const std::string& prefix, const Error& error) {
  return Error{prefix + error.message, error.local};
}

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
  const Error& failure() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Expected<void>: success or an error message.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_->message; }
  const Error& failure() const { return *error_; }

 private:
  std::optional<Error> error_;
};

using Status = Expected<void>;

}  // namespace es
