// status: the outcome of an operation, in the spirit of LevelDB's Status.
//
// A status is ok, or it carries a code (what went wrong), a category (what the
// caller should do about it) and a message (for a human). It stays representable
// as exactly those three things so it can cross an actor or process boundary.
//
// Categories:
//   transient  - nothing happened; the same call may succeed later (retry).
//   permanent  - nothing happened and retrying will not help (give up, fix input).
//   ambiguous  - it may or may not have happened (e.g. a failed fsync after the
//                bytes reached the kernel): the caller must reconcile, not retry
//                blindly.
//
// result<T> holds a T or a non-ok status; it is the return type of every fallible
// function that also produces a value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "magnetite/config.h"

namespace magnetite {

enum class status_code : std::uint8_t {
  ok = 0,
  not_found,
  invalid_argument,  // the caller's input breaks a documented rule
  corruption,        // stored bytes fail a check
  io_error,          // the operating system refused an operation
  no_space,          // ENOSPC / quota
  busy,              // a resource (e.g. a data directory lock) is held elsewhere
  failed,            // fail-stop: the component refuses work after an earlier error
  conflict,          // an optimistic precondition did not hold
  timeout,
  not_supported,
  permission_denied,  // the caller's identity is not granted this (a cluster file's `client` lines)
};

enum class status_category : std::uint8_t {
  none = 0,  // only for ok
  transient,
  permanent,
  ambiguous,
};

MAGNETITE_API std::string_view to_string(status_code c) noexcept;
MAGNETITE_API std::string_view to_string(status_category c) noexcept;

class [[nodiscard]] MAGNETITE_API status {
 public:
  status() noexcept = default;  // ok

  static status ok() noexcept { return {}; }
  static status make(status_code code, status_category cat, std::string msg) {
    return status{code, cat, std::move(msg)};
  }

  // Shorthands with the category each code usually has. A caller that knows
  // better builds the status with make().
  static status not_found(std::string msg) {
    return make(status_code::not_found, status_category::permanent, std::move(msg));
  }
  static status invalid_argument(std::string msg) {
    return make(status_code::invalid_argument, status_category::permanent, std::move(msg));
  }
  static status corruption(std::string msg) {
    return make(status_code::corruption, status_category::permanent, std::move(msg));
  }
  static status io_error(std::string msg, status_category cat = status_category::permanent) {
    return make(status_code::io_error, cat, std::move(msg));
  }
  static status busy(std::string msg) { return make(status_code::busy, status_category::transient, std::move(msg)); }
  static status failed(std::string msg) {
    return make(status_code::failed, status_category::permanent, std::move(msg));
  }

  bool is_ok() const noexcept { return code_ == status_code::ok; }
  explicit operator bool() const noexcept { return is_ok(); }

  status_code code() const noexcept { return code_; }
  status_category category() const noexcept { return category_; }
  const std::string& message() const noexcept { return message_; }

  // The same status with a different category, e.g. an io_error that becomes
  // ambiguous because the bytes may already be on disk.
  status with_category(status_category cat) const& { return status{code_, cat, message_}; }

  // "code (category): message", or "ok".
  std::string to_string() const;

  friend bool operator==(const status& a, const status& b) noexcept {
    return a.code_ == b.code_ && a.category_ == b.category_ && a.message_ == b.message_;
  }

 private:
  status(status_code code, status_category cat, std::string msg)
      : code_(code), category_(code == status_code::ok ? status_category::none : cat), message_(std::move(msg)) {}

  status_code code_ = status_code::ok;
  status_category category_ = status_category::none;
  std::string message_;
};

// A value or the reason there is none. Never holds an ok status without a value.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  result(status s) : v_(std::in_place_index<1>, std::move(s)) {      // NOLINT
    if (std::get<1>(v_).is_ok())
      v_.template emplace<1>(status::make(status_code::failed, status_category::permanent,
                                          "internal error: result built from an ok status"));
  }

  bool is_ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return is_ok(); }

  // As std::optional: a const result gives const access and a temporary
  // gives its value away, so `*db->get(k)` works on the result of a call. A
  // reference into a temporary's value lives to the end of the full
  // expression only: `auto v = *f()` keeps the value, `auto& v = *f()` dangles.
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T&& value() const&& { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T&& operator*() const&& { return std::move(*this).value(); }

  // The error; ok when a value is held.
  status error() const { return is_ok() ? status{} : std::get<1>(v_); }

 private:
  std::variant<T, status> v_;
};

}  // namespace magnetite
