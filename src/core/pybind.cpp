// dftracer._dftracer: Python binding of the core (docs/design.md "Python binding of the core").
// log_event is the hot path of the Python decorator: strings are read as UTF-8 views of the
// Python objects (no copies) and the args dict is walked with the CPython API.
#include <pybind11/pybind11.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../format/event.h"
#include "../format/json_text.h"
#include "gzip_member.h"
#include "py_args.h"
#include "py_strings.h"
#include "tracer.h"

namespace py = pybind11;
using dftracer::ArgList;
using dftracer::Tracer;
using dftracer::py_strings::as_view;

namespace {

using dftracer::py_args::Kind;
using dftracer::py_args::Value;

// Fill `builder` from a dict (values int/float/bool/str; others str()-ed): every arg up to the
// byte limit (src/core/py_args.h).
void fill_args(PyObject* dict, dftracer::py_args::Builder* builder, std::vector<py::object>* keep) {
  if (!dict || dict == Py_None || !PyDict_Check(dict)) return;
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict, &pos, &k, &v)) {
    std::string_view key = as_view(k, keep);
    Value x;
    if (PyBool_Check(v)) {
      x.kind = Kind::Bool;
      x.b = v == Py_True;
    } else if (PyLong_Check(v)) {
      int overflow = 0;
      long long ll = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred()) {
          PyErr_Clear();
          x.s = as_view(v, keep);
        } else {
          x.kind = Kind::Uint;
          x.u = u;
        }
      } else if (overflow < 0) {
        x.s = as_view(v, keep);
      } else {
        x.kind = Kind::Int;
        x.i = ll;
      }
    } else if (PyFloat_Check(v)) {
      x.kind = Kind::Double;
      x.d = PyFloat_AS_DOUBLE(v);
    } else {
      x.s = as_view(v, keep);
    }
    builder->add(key, x);
  }
  builder->finish();
}

}  // namespace

PYBIND11_MODULE(_dftracer, m) {
  m.doc() = "dftracer core binding: Chrome trace-event records (µs timestamps) into gzip-member traces";
  m.attr("__version__") = DFTRACER_VERSION;  // dftracer/_version.py, through CMake
  m.attr("MAX_ARGS_BYTES") = dftracer::kMaxPyArgsBytes;

  m.def(
      "initialize",
      [](py::object log_file, py::object data_dirs, py::object process_id) {
        // Path-like objects are accepted (os.fspath / str()).
        auto to_str = [](const py::object& o) -> std::optional<std::string> {
          if (o.is_none()) return std::nullopt;
          py::object s = py::hasattr(o, "__fspath__") ? o.attr("__fspath__")() : py::str(o);
          if (py::isinstance<py::bytes>(s)) return std::string(py::cast<py::bytes>(s));
          return py::cast<std::string>(py::str(s));
        };
        std::optional<std::string> lf = to_str(log_file), dd = to_str(data_dirs);
        if (lf && lf->empty()) lf.reset();
        if (dd && dd->empty()) dd.reset();
        int pid = process_id.is_none() ? -1 : py::cast<int>(process_id);
        Tracer* t = Tracer::instance();
        {
          py::gil_scoped_release release;
          t->initialize(lf ? lf->c_str() : nullptr, dd ? dd->c_str() : nullptr, pid < 0 ? nullptr : &pid);
        }
        return t->active();
      },
      py::arg("log_file") = py::none(), py::arg("data_dirs") = py::none(), py::arg("process_id") = py::none(),
      "Start tracing if the configuration enables it; returns True if tracing is on. log_file: trace "
      "name (str or path-like; None or '' for DFTRACER_LOG_FILE); data_dirs: ':'-separated traced "
      "prefixes (None or '' for DFTRACER_DATA_DIR); process_id: recorded as metadata 'process_id' "
      "(None or negative: none; events keep the OS pid). The core creates the log directory. A second "
      "call keeps the instance (a new log_file renames the output).");

  m.def(
      "config",
      []() {
        // The core's parsed configuration (one parser for every API: the Python layer reads its
        // decisions from here instead of parsing the environment itself).
        const dftracer::Config& c = dftracer::config();
        static const char* const kLevels[] = {"ERROR", "WARN", "INFO", "DEBUG"};
        py::dict d;
        d["enable"] = c.enable;
        d["enable_set"] = c.enable_set;
        d["init"] = c.init == dftracer::InitMode::PRELOAD ? "PRELOAD" : "FUNCTION";
        d["log_file"] = c.log_file;
        py::list dirs;
        if (!c.trace_all)
          for (const std::string& dir : c.data_dirs) dirs.append(dir);
        d["data_dirs"] = dirs;
        d["trace_all"] = c.trace_all;
        d["inc_metadata"] = c.inc_metadata;
        d["compression"] = c.compression;
        d["compression_level"] = c.compression_level;
        d["write_buffer_size"] = c.write_buffer_size;
        d["disable_io"] = c.disable_io;
        d["disable_posix"] = c.disable_posix;
        d["disable_stdio"] = c.disable_stdio;
        d["bind_signals"] = c.bind_signals;
        d["flush_interval_ms"] = c.flush_interval_ms;
        d["set_core_affinity"] = c.set_core_affinity;
        d["log_level"] = kLevels[static_cast<int>(c.log_level)];
        d["config_file"] = c.config_file;
        d["config_error"] = c.config_error;
        return d;
      },
      "The core's configuration (docs/configuration.md), parsed once per process from the "
      "DFTRACER_CONFIGURATION YAML file and DFTRACER_* variables: a dict with enable, init "
      "('FUNCTION'/'PRELOAD'), log_file (absolute prefix), data_dirs (list of absolute paths, empty "
      "with trace_all), flush_interval_ms, write_buffer_size (bytes), compression_level, log_level, "
      "config_error, ... . Under the preload, enable already includes DFTRACER_INIT=PRELOAD.");

  m.def(
      "is_active", []() { return Tracer::instance()->active(); }, "True while events are recorded.");
  m.def(
      "get_time", []() { return dftracer::now_us(); }, "Wall-clock time in µs since the epoch.");

  m.def(
      "log_event",
      [](py::handle name, py::handle cat, int64_t start, int64_t dur, py::handle args) {
        Tracer* t = Tracer::instance();
        if (!t->active()) return;
        std::vector<py::object> keep;
        std::string_view n = as_view(name.ptr(), &keep);
        std::string_view c = as_view(cat.ptr(), &keep);
        if (args.is_none()) {
          t->log_complete(n, c, start, dur, nullptr);
          return;
        }
        ArgList a;
        dftracer::py_args::Builder b(&a);
        fill_args(args.ptr(), &b, &keep);
        t->log_complete(n, c, start, dur, &a);
      },
      py::arg("name"), py::arg("cat"), py::arg("start"), py::arg("dur"), py::arg("args") = py::none(),
      "Complete event (\"ph\":\"X\"): start and dur in µs; args values int/float/bool/str (others str()-ed).");

  m.def(
      "log_instant",
      [](py::handle name, py::handle cat, int64_t ts, py::handle args) {
        Tracer* t = Tracer::instance();
        if (!t->active()) return;
        std::vector<py::object> keep;
        std::string_view n = as_view(name.ptr(), &keep);
        std::string_view c = as_view(cat.ptr(), &keep);
        ArgList a;
        dftracer::py_args::Builder b(&a);
        fill_args(args.ptr(), &b, &keep);
        t->log_instant(n, c, ts, &a);
      },
      py::arg("name"), py::arg("cat"), py::arg("ts"), py::arg("args") = py::none(),
      "Instant event (\"ph\":\"i\") at ts µs.");

  m.def(
      "log_metadata",
      [](py::handle key, py::handle value) {
        Tracer* t = Tracer::instance();
        if (!t->active()) return;
        std::vector<py::object> keep;
        t->log_metadata(as_view(key.ptr(), &keep), as_view(value.ptr(), &keep));
      },
      py::arg("key"), py::arg("value"), "Metadata record (\"ph\":\"M\", args {name: key, value: value}).");

  m.def(
      "finalize",
      []() {
        py::gil_scoped_release release;
        Tracer::instance()->finalize();
      },
      "Flush and close the trace file (idempotent).");

  m.def(
      "flush",
      []() {
        py::gil_scoped_release release;
        Tracer::instance()->flush();
      },
      "Write all buffered events now (tracing continues).");

  m.def(
      "encode_member",
      [](py::bytes data, int level) {
        std::string_view in = data;  // `data` stays referenced by the caller while unlocked
        std::string out;
        bool ok;
        {
          py::gil_scoped_release release;  // callers compress on several threads
          dftracer::MemberEncoder enc(level < 1 || level > 9 ? 6 : level);
          ok = enc.encode(in.data(), in.size(), &out);
        }
        if (!ok) throw std::runtime_error("encode_member: compression failed");
        return py::bytes(out);
      },
      py::arg("data"), py::arg("level") = 6,
      "One gzip member with the 'DF' size subfield, exactly as the tracer writes each buffer "
      "(docs/format.md); data should be whole lines. For tests and tools that build traces.");

  m.attr("TRACER_CATEGORY") = py::str(dftracer::format::kTracerCategory.data(),
                                      dftracer::format::kTracerCategory.size());  // src/format/event.h

  m.def(
      "trace_path",
      []() -> py::object {
        std::string p = Tracer::instance()->trace_path();
        if (p.empty()) return py::none();
        return py::str(p);
      },
      "Current output file, or None when tracing was never started.");
}
