// Args of one Python-API event, shared by the two Python bindings of the core (pybind.cpp:
// dftracer._dftracer; upstream_module.cpp: dftracer.dftracer, which pydftracer drives).
// Every arg is kept up to kMaxPyArgsBytes of args JSON per event (each `"key":value` pair as
// format_event writes it, plus its comma; docs/python_api.md "Args"): the first
// ArgList::kCapacity - 1 as ArgList entries, the others as one raw JSON fragment. An arg that
// would cross the limit is dropped and counted in the core (count_dropped_args), which records
// the count at finalize (metadata `dropped_args` + one stderr line).
#pragma once

#include <string>
#include <string_view>

#include "../format/json_text.h"
#include "tracer.h"

namespace dftracer::py_args {

enum class Kind { Int, Uint, Double, Bool, Str };

struct Value {
  Kind kind = Kind::Str;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  bool b = false;
  std::string_view s;
};

// `"key":value` as format_event writes it (src/core/event_format.h), appended to `out`.
inline void append_pair(std::string& out, std::string_view key, const Value& v) {
  json::append_quoted(out, key);
  out += ':';
  char num[json::kMaxNumber];
  switch (v.kind) {
    case Kind::Int: out.append(num, json::write_i64(num, v.i)); break;
    case Kind::Uint: out.append(num, json::write_u64(num, v.u)); break;
    case Kind::Double: out.append(num, json::write_double(num, v.d)); break;
    case Kind::Bool: out += v.b ? "true" : "false"; break;
    case Kind::Str: json::append_quoted(out, v.s); break;
  }
}

// Fills an ArgList under the byte limit. Keys and string values are views that must stay valid
// until the log_* call returns; so must the builder (it owns the raw fragment).
class Builder {
 public:
  explicit Builder(ArgList* args) : args_(args) {}
  void add(std::string_view key, const Value& x) {
    pair_.clear();
    append_pair(pair_, key, x);
    size_t bytes = pair_.size() + 1;  // with its ','
    if (total_ + bytes > kMaxPyArgsBytes) {
      count_dropped_args(1, int64_t(bytes));
      return;
    }
    total_ += bytes;
    if (args_->size() < ArgList::kCapacity - 1) {  // the last entry is kept for the fragment
      switch (x.kind) {
        case Kind::Int: args_->add_int(key, x.i); break;
        case Kind::Uint: args_->add_uint(key, x.u); break;
        case Kind::Double: args_->add_double(key, x.d); break;
        case Kind::Bool: args_->add_bool(key, x.b); break;
        case Kind::Str: args_->add_str(key, x.s); break;
      }
    } else {
      if (!extra_.empty()) extra_ += ',';
      extra_ += pair_;
    }
  }
  // Call once after the last add(), before logging.
  void finish() {
    if (!extra_.empty()) args_->add_raw(extra_);
  }

 private:
  ArgList* args_;
  std::string pair_, extra_;
  size_t total_ = 0;
};

}  // namespace dftracer::py_args
